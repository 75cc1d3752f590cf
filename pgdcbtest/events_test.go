package pgdcbtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/query"
)

func stored(evs ...eventstore.Event) []eventstore.StoredEvent {
	out := make([]eventstore.StoredEvent, len(evs))
	for i, ev := range evs {
		out[i] = eventstore.StoredEvent{Event: ev, Position: int64(i + 1)}
	}
	return out
}

func TestDiffEvents(t *testing.T) {
	t.Parallel()
	got := stored(
		eventstore.Event{Type: "Deposited", Tags: eventstore.MustEvent("x", nil, "wallet=a", "command_id=1").Tags, Data: []byte(`{"b":2, "a":1}`)},
		eventstore.MustEvent("Withdrawn", map[string]int{"a": 1}, "wallet=a"),
	)
	ok := []eventstore.Event{
		eventstore.MustEvent("Deposited", map[string]int{"a": 1, "b": 2}, "wallet=a"),
		{Type: "Withdrawn", Tags: eventstore.MustEvent("x", nil, "wallet=a").Tags}, // nil Data: not compared
	}
	require.Empty(t, pgdcbtest.DiffEvents(got, ok, "command_id"))
	pgdcbtest.RequireEvents(t, got, ok, "command_id")

	for name, tc := range map[string]struct {
		want   []eventstore.Event
		ignore []string
		msg    string
	}{
		"type":       {[]eventstore.Event{eventstore.MustEvent("Opened", nil, "wallet=a"), ok[1]}, []string{"command_id"}, "event 0: type Deposited, want Opened"},
		"extra tag":  {ok, nil, "event 0: Deposited: tags [command_id=1 wallet=a], want [wallet=a]"},
		"tag":        {[]eventstore.Event{ok[0], {Type: "Withdrawn", Tags: eventstore.MustEvent("x", nil, "wallet=b").Tags}}, []string{"command_id"}, "want [wallet=b]"},
		"data":       {[]eventstore.Event{eventstore.MustEvent("Deposited", map[string]int{"a": 1}, "wallet=a"), ok[1]}, []string{"command_id"}, `event 0: Deposited: data {"b":2, "a":1}, want {"a":1}`},
		"missing":    {append(ok, eventstore.MustEvent("Closed", nil)), []string{"command_id"}, "event 2: missing, want Closed"},
		"unexpected": {ok[:1], []string{"command_id"}, "event 1: unexpected Withdrawn"},
	} {
		t.Run(name, func(t *testing.T) {
			msg := pgdcbtest.DiffEvents(got, tc.want, tc.ignore...)
			require.Contains(t, msg, tc.msg)
			require.Contains(t, msg, "\ngot:\n")
			require.Contains(t, msg, "\nwant:\n")
			failures := (&pgtest.Recorder{TB: t}).Run(func(ft testing.TB) { pgdcbtest.RequireEvents(ft, got, tc.want, tc.ignore...) })
			require.Equal(t, []string{"pgdcbtest: " + msg}, failures)
		})
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	evs := stored(
		eventstore.MustEvent("Deposited", nil, "wallet=a"),
		eventstore.MustEvent("Deposited", nil, "wallet=b"),
		eventstore.MustEvent("Withdrawn", nil, "wallet=a"),
	)
	require.Equal(t, []eventstore.StoredEvent{evs[0], evs[2]}, pgdcbtest.Select(evs, query.Tagged(nil, "wallet=a")))
	require.Equal(t, []eventstore.StoredEvent{evs[0]}, pgdcbtest.Select(evs, query.Tagged([]string{"Deposited"}, "wallet=a")))
	require.Empty(t, pgdcbtest.Select(evs, query.Tagged(nil, "wallet=c")))
}
