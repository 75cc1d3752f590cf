package upcast_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/upcast"
)

func rename(from, to string) upcast.Func {
	return func(data json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		m[to] = m[from]
		delete(m, from)
		return json.Marshal(m)
	}
}

func TestRegisterInOrder(t *testing.T) {
	var r upcast.Registry
	require.Equal(t, 1, r.Current("a"))
	require.Equal(t, "", r.Version())
	require.Error(t, r.Register("a", 2, rename("x", "y")), "a step from 2 before the one from 1")
	require.Error(t, r.Register("a", 1, nil))
	require.NoError(t, r.Register("a", 1, rename("x", "y")))
	require.Equal(t, 2, r.Current("a"))
	v2 := r.Version()
	require.NotEmpty(t, v2)
	require.NoError(t, r.Register("a", 2, rename("y", "z")))
	require.NotEqual(t, v2, r.Version(), "a new step is a new set")
	require.Error(t, r.Rename("a", "b"), "a type with upcasters is renamed before they are registered")
}

func TestApplyChains(t *testing.T) {
	var r upcast.Registry
	require.NoError(t, r.Register("a", 1, rename("x", "y")))
	require.NoError(t, r.Register("a", 2, rename("y", "z")))
	ev := pgdcb.StoredEvent{Event: pgdcb.Event{Type: "a", Data: json.RawMessage(`{"x": 1}`)}, Position: 7}
	require.NoError(t, r.Apply(&ev))
	require.JSONEq(t, `{"z": 1}`, string(ev.Data))
	require.JSONEq(t, `{"pgdcb_version": 3}`, string(ev.Metadata))
	again := ev
	require.NoError(t, r.Apply(&again), "applying twice is applying once")
	require.Equal(t, ev, again)

	mid := pgdcb.StoredEvent{Event: pgdcb.Event{Type: "a", Data: json.RawMessage(`{"y": 2}`),
		Metadata: json.RawMessage(`{"c": "k", "pgdcb_version": 2}`)}}
	require.NoError(t, r.Apply(&mid))
	require.JSONEq(t, `{"z": 2}`, string(mid.Data))
	require.JSONEq(t, `{"c": "k", "pgdcb_version": 3}`, string(mid.Metadata))
}

func TestRename(t *testing.T) {
	var r upcast.Registry
	require.NoError(t, r.Rename("old", "mid"))
	require.NoError(t, r.Rename("mid", "new"))
	require.Error(t, r.Rename("old", "other"))
	require.Equal(t, []string{"new", "mid", "old"}, r.Names("old"))
	require.Equal(t, []string{"new", "mid", "old"}, r.Names("new"))
	require.NoError(t, r.Register("new", 1, rename("x", "y")))
	ev := pgdcb.StoredEvent{Event: pgdcb.Event{Type: "old", Data: json.RawMessage(`{"x": 1}`)}}
	require.NoError(t, r.Apply(&ev))
	require.Equal(t, "new", ev.Type)
	require.JSONEq(t, `{"y": 1}`, string(ev.Data))
}

func TestApplyFailsLoudly(t *testing.T) {
	boom := errors.New("boom")
	for name, fn := range map[string]upcast.Func{
		"error":   func(json.RawMessage) (json.RawMessage, error) { return nil, boom },
		"invalid": func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"x":`), nil },
	} {
		t.Run(name, func(t *testing.T) {
			var r upcast.Registry
			require.NoError(t, r.Register("a", 1, fn))
			ev := pgdcb.StoredEvent{Event: pgdcb.Event{Type: "a", Data: json.RawMessage(`{}`)}, Position: 42}
			err := r.Apply(&ev)
			var ue *upcast.Error
			require.ErrorAs(t, err, &ue)
			require.Equal(t, int64(42), ue.Position)
			require.Equal(t, 1, ue.Version)
			require.Contains(t, err.Error(), "position 42")
		})
	}
	var r upcast.Registry
	require.NoError(t, r.Register("a", 1, rename("x", "y")))
	for _, meta := range []string{`{"pgdcb_version": 3}`, `{"pgdcb_version": "2"}`, `{"pgdcb_version": 0}`} {
		ev := pgdcb.StoredEvent{Event: pgdcb.Event{Type: "a", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(meta)}, Position: 5}
		var ue *upcast.Error
		require.ErrorAs(t, r.Apply(&ev), &ue, meta)
	}
}
