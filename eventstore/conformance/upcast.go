package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// upcastRegistry is the registry the upcasting checks use: "SeatHeld" was
// renamed "SeatReserved", whose data went from {"seat"} (1) to {"seatNo"}
// (2) to {"seat": {"no"}} (3).
func upcastRegistry(t testing.TB) *upcast.Registry {
	var r upcast.Registry
	require.NoError(t, r.Rename("SeatHeld", "SeatReserved"))
	require.NoError(t, r.Register("SeatReserved", 1, func(d json.RawMessage) (json.RawMessage, error) {
		var v struct{ Seat int }
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"seatNo": v.Seat})
	}))
	require.NoError(t, r.Register("SeatReserved", 2, func(d json.RawMessage) (json.RawMessage, error) {
		var v struct {
			SeatNo int `json:"seatNo"`
		}
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]map[string]int{"seat": {"no": v.SeatNo}})
	}))
	return &r
}

// oldEvent is an event as code before the changes wrote it: version 1 of
// typ (an append records the current version unless the event records one).
func oldEvent(typ string, seat int, tagStrings ...string) pgdcb.Event {
	e := ev(typ, map[string]int{"seat": seat}, tagStrings...)
	e.Metadata = json.RawMessage(`{"pgdcb_version": 1}`)
	return e
}

// Events written in older shapes and under an old type name read in the
// current shape, under the current name, on every read (Read, ReadAll,
// ReadLast, Project, ReadTail); an append records the current version; a
// query naming either name finds both; a condition naming either name
// fails on an event appended under the other.
func testUpcasting(t testing.TB, newStore func(testing.TB, *upcast.Registry) pgdcb.Store) {
	ctx := context.Background()
	s := newStore(t, upcastRegistry(t))
	v2 := ev("SeatReserved", map[string]int{"seatNo": 2}, "show=1")
	v2.Metadata = json.RawMessage(`{"by": "x", "pgdcb_version": 2}`)
	appendOK(t, s, oldEvent("SeatHeld", 1, "show=1"), v2)
	appendOK(t, s, ev("SeatReserved", map[string]map[string]int{"seat": {"no": 3}}, "show=1"))

	want := []string{`{"seat": {"no": 1}}`, `{"seat": {"no": 2}}`, `{"seat": {"no": 3}}`}
	check := func(how string, evs []pgdcb.StoredEvent, want ...string) {
		t.Helper()
		require.Len(t, evs, len(want), how)
		for i, e := range evs {
			require.Equal(t, "SeatReserved", e.Type, "%s: event %d", how, i)
			require.JSONEq(t, want[i], string(e.Data), "%s: event %d", how, i)
			var m map[string]any
			require.NoError(t, json.Unmarshal(e.Metadata, &m), how)
			require.EqualValues(t, 3, m[upcast.MetadataKey], "%s: event %d records the current version", how, i)
		}
	}
	for _, name := range []string{"SeatHeld", "SeatReserved"} {
		q := query.Tagged([]string{name}, "show=1")
		evs, _, err := s.ReadAll(ctx, q, nil)
		require.NoError(t, err)
		check("ReadAll "+name, evs, want...)
		var it []pgdcb.StoredEvent
		for e, err := range s.Read(ctx, q, nil).All() {
			require.NoError(t, err)
			it = append(it, e)
		}
		check("Read "+name, it, want...)
		last, _, err := s.ReadLast(ctx, q)
		require.NoError(t, err)
		require.NotNil(t, last)
		check("ReadLast "+name, []pgdcb.StoredEvent{*last}, want[2])
		var folded []pgdcb.StoredEvent
		m := pgdcb.NewModel(q, 0, func(n int, e pgdcb.StoredEvent) int { folded = append(folded, e); return n + 1 })
		_, err = s.Project(ctx, m)
		require.NoError(t, err)
		check("Project "+name, folded, want...)
		var tail []pgdcb.StoredEvent
		await.Until(t, tailTimeout, func() (bool, string) {
			b, err := s.ReadTail(ctx, q, cursor.Start, 0)
			require.NoError(t, err)
			tail = b.Events
			return len(tail) == len(want), fmt.Sprintf("%d events", len(tail))
		})
		check("ReadTail "+name, tail, want...)
	}
	require.Equal(t, 3, count(t, s, query.Tagged([]string{"SeatHeld", "Other"}, "show=1")), "either name finds both")
	require.Equal(t, 3, count(t, s, query.New(query.Item{Types: []string{"SeatReserved"}})))

	// Conditions: either name fails on an event appended under the other.
	for _, c := range []struct{ cond, appended string }{{"SeatReserved", "SeatHeld"}, {"SeatHeld", "SeatReserved"}} {
		q := query.Tagged([]string{c.cond}, "show=2")
		_, cur, err := s.ReadAll(ctx, q, nil)
		require.NoError(t, err)
		appendOK(t, s, oldEvent(c.appended, 9, "show=2"))
		_, err = s.AppendIf(ctx, []pgdcb.Event{ev("Other", 1, "show=2")}, appendif.FailIf(q, &cur))
		require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "a condition on %s must see an event appended as %s", c.cond, c.appended)
	}

	// Metadata that is not an object cannot record the version.
	bad := ev("SeatReserved", map[string]int{"seatNo": 1}, "show=3")
	bad.Metadata = json.RawMessage(`[1]`)
	_, err := s.Append(ctx, []pgdcb.Event{bad})
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
	require.Zero(t, count(t, s, query.Tagged(nil, "show=3")))
}

// An upcaster that fails, or returns what is not JSON, fails every read
// that meets the event, naming its position: no event is skipped.
func testUpcastFailsLoudly(t testing.TB, newStore func(testing.TB, *upcast.Registry) pgdcb.Store) {
	ctx := context.Background()
	boom := errors.New("boom")
	for name, fn := range map[string]upcast.Func{
		"error":       func(json.RawMessage) (json.RawMessage, error) { return nil, boom },
		"invalidJSON": func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"a"`), nil },
	} {
		var r upcast.Registry
		require.NoError(t, r.Register("Broken", 1, fn))
		s := newStore(t, &r)
		old := ev("Broken", 1, "k=1")
		old.Metadata = json.RawMessage(`{"pgdcb_version": 1}`)
		appendOK(t, s, ev("Fine", 1, "k=1"))
		pos := appendOK(t, s, old).Positions[0]
		q := query.Tagged(nil, "k=1")
		requirePos := func(how string, err error) {
			t.Helper()
			var ue *upcast.Error
			require.ErrorAs(t, err, &ue, "%s %s", name, how)
			require.Equal(t, pos, ue.Position, "%s %s", name, how)
			require.Contains(t, err.Error(), fmt.Sprintf("position %d", pos), "%s %s", name, how)
		}
		_, _, err := s.ReadAll(ctx, q, nil)
		requirePos("ReadAll", err)
		_, _, err = s.ReadLast(ctx, q)
		requirePos("ReadLast", err)
		_, err = s.Project(ctx, pgdcb.NewModel(q, 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 }))
		requirePos("Project", err)
		// A tailing read stops at the horizon: it meets the event once no
		// transaction that began before it runs; until then it must not
		// hand it out.
		await.Until(t, tailTimeout, func() (bool, string) {
			b, err := s.ReadTail(ctx, q, cursor.Start, 0)
			if err == nil {
				for _, e := range b.Events {
					require.NotEqual(t, pos, e.Position, "%s ReadTail handed out the event it cannot upcast", name)
				}
				return false, fmt.Sprintf("%d events, no error", len(b.Events))
			}
			requirePos("ReadTail", err)
			return true, ""
		})
		// Other events still read.
		require.Equal(t, 1, count(t, s, query.Tagged([]string{"Fine"}, "k=1")))
	}
}

// A rename keeps conditions exact under a race: with an event of the old
// name on the boundary, 32 writers decide at once, half of them old code
// (appending and conditioning on the old name), half new code (the new
// name): exactly one wins each round.
func testUpcastRenameRace(t testing.TB, newStore func(testing.TB, *upcast.Registry) pgdcb.Store, o Options) {
	ctx := context.Background()
	s := newStore(t, upcastRegistry(t))
	const racers = 32
	for r := range o.Rounds {
		boundary := fmt.Sprintf("show=r%d", r)
		appendOK(t, s, oldEvent("SeatHeld", 0, boundary))
		errs := race(racers, func(i int) func() error {
			name := "SeatReserved"
			if i%2 == 0 {
				name = "SeatHeld"
			}
			q := query.Tagged([]string{name}, boundary)
			_, cur, err := s.ReadAll(ctx, q, nil)
			if err != nil {
				return func() error { return fmt.Errorf("decision read: %w", err) }
			}
			return func() error {
				_, err := s.AppendIf(ctx, []pgdcb.Event{oldEvent(name, i+1, boundary)}, appendif.FailIf(q, &cur))
				return err
			}
		})
		ok, conflict, _ := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d: winners", r)
		require.Equal(t, racers-1, conflict, "round %d", r)
		require.Equal(t, 2, count(t, s, query.Tagged([]string{"SeatReserved"}, boundary)), "round %d", r)
	}
}
