package pgdcbtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/query"
)

func stored(evs ...pgdcb.Event) []pgdcb.StoredEvent {
	out := make([]pgdcb.StoredEvent, len(evs))
	for i, ev := range evs {
		out[i] = pgdcb.StoredEvent{Event: ev, Position: int64(i + 1)}
	}
	return out
}

func TestDiffEvents(t *testing.T) {
	t.Parallel()
	got := stored(
		pgdcb.Event{Type: "Deposited", Tags: pgdcb.MustEvent("x", nil, "wallet=a", "command_id=1").Tags, Data: []byte(`{"b":2, "a":1}`)},
		pgdcb.MustEvent("Withdrawn", map[string]int{"a": 1}, "wallet=a"),
	)
	ok := []pgdcb.Event{
		pgdcb.MustEvent("Deposited", map[string]int{"a": 1, "b": 2}, "wallet=a"),
		{Type: "Withdrawn", Tags: pgdcb.MustEvent("x", nil, "wallet=a").Tags}, // nil Data: not compared
	}
	require.Empty(t, pgdcbtest.DiffEvents(got, ok, "command_id"))
	pgdcbtest.RequireEvents(t, got, ok, "command_id")

	for name, tc := range map[string]struct {
		want   []pgdcb.Event
		ignore []string
		msg    string
	}{
		"type":       {[]pgdcb.Event{pgdcb.MustEvent("Opened", nil, "wallet=a"), ok[1]}, []string{"command_id"}, "event 0: type Deposited, want Opened"},
		"extra tag":  {ok, nil, "event 0: Deposited: tags [command_id=1 wallet=a], want [wallet=a]"},
		"tag":        {[]pgdcb.Event{ok[0], {Type: "Withdrawn", Tags: pgdcb.MustEvent("x", nil, "wallet=b").Tags}}, []string{"command_id"}, "want [wallet=b]"},
		"data":       {[]pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"a": 1}, "wallet=a"), ok[1]}, []string{"command_id"}, `event 0: Deposited: data {"b":2, "a":1}, want {"a":1}`},
		"missing":    {append(ok, pgdcb.MustEvent("Closed", nil)), []string{"command_id"}, "event 2: missing, want Closed"},
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
		pgdcb.MustEvent("Deposited", nil, "wallet=a"),
		pgdcb.MustEvent("Deposited", nil, "wallet=b"),
		pgdcb.MustEvent("Withdrawn", nil, "wallet=a"),
	)
	require.Equal(t, []pgdcb.StoredEvent{evs[0], evs[2]}, pgdcbtest.Select(evs, query.Tagged(nil, "wallet=a")))
	require.Equal(t, []pgdcb.StoredEvent{evs[0]}, pgdcbtest.Select(evs, query.Tagged([]string{"Deposited"}, "wallet=a")))
	require.Empty(t, pgdcbtest.Select(evs, query.Tagged(nil, "wallet=c")))
}
