package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

// Tailing in pages delivers every matching event once, in log order, with
// cursors that cover their page; once caught up the cursor names the log's
// last event (never a point past it) and the page's Head is the log's head.
func testTailPages(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	q := query.Tagged(nil, "stream=s1")
	var want []int64
	for i := range 7 {
		var batch []pgdcb.Event
		for j := range i%3 + 1 {
			batch = append(batch, ev("E", j, "stream=s1"), ev("Noise", j, "stream=s2"))
		}
		res := appendOK(t, s, batch...)
		for k := 0; k < len(res.Positions); k += 2 {
			want = append(want, res.Positions[k])
		}
	}
	for _, limit := range []int{0, 1, 2, 5, 100} {
		got, after := tailChecked(t, s, q, cursor.Start, limit, len(want))
		require.Equal(t, want, positions(got), "limit %d: every matching event once, in log order", limit)
		// Caught up: the cursor reaches the last event of the whole log
		// (a Noise event) once nothing is in flight, and never passes it.
		h, err := s.Head(ctx)
		require.NoError(t, err)
		await.Until(t, tailTimeout, func() (bool, string) {
			b, err := s.ReadTail(ctx, q, after, limit)
			require.NoError(t, err)
			require.Empty(t, b.Events, "limit %d: nothing new", limit)
			require.Equal(t, point(h), b.Head, "the page's Head is the log's last event")
			require.LessOrEqual(t, cursor.Compare(b.Cursor.TransactionID, b.Cursor.Position, h.TransactionID, h.Position), 0,
				"a tailing cursor never points past the newest event")
			if b.Cursor == point(h) {
				require.Greater(t, b.Horizon, h.TransactionID, "caught up to the head: the horizon is above it")
				return true, ""
			}
			after = b.Cursor
			return false, fmt.Sprintf("the cursor at %v, not the head %v (horizon %d)", b.Cursor, h, b.Horizon)
		})
	}
	// A starting cursor past everything matching stays put.
	b, err := s.ReadTail(ctx, query.Tagged(nil, "stream=none"), cursor.Start, 10)
	require.NoError(t, err)
	require.Empty(t, b.Events)

	// Events appended later are delivered after the old ones.
	_, after := tailChecked(t, s, q, cursor.Start, 3, len(want))
	late := appendOK(t, s, ev("E", 99, "stream=s1"))
	got, _ := tailChecked(t, s, q, after, 3, 1)
	require.Equal(t, late.Positions, positions(got))
}

// On a full page (the limit reached) Head is still the log's last event,
// not the page's last: a lag computed from Head and the page's cursor must
// count what the page left out.
func testTailFullPageHead(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	appendOK(t, s, ev("E", 1, "a=1"), ev("E", 2, "a=1"))
	last := appendOK(t, s, ev("F", 1, "b=1"))
	want := last.Cursor() // one event: Positions[0]
	// A transaction open elsewhere in the cluster may hold the horizon below
	// the events for a while: read until the page is full, with a deadline.
	fullPage := func(limit int) pgdcb.TailBatch {
		var b pgdcb.TailBatch
		await.Until(t, tailTimeout, func() (bool, string) {
			var err error
			b, err = s.ReadTail(ctx, query.Tagged(nil, "a=1"), cursor.Start, limit)
			require.NoError(t, err)
			return len(b.Events) == limit, fmt.Sprintf("%d of a full page of %d (horizon %d)", len(b.Events), limit, b.Horizon)
		})
		return b
	}
	b := fullPage(2)
	require.Equal(t, point(want), b.Head, "a full page's Head is the log's last event")
	require.Equal(t, b.Events[1].Position, b.Cursor.Position, "a full page's cursor is its last event")
	// A page of one of several matching events: the same Head.
	b = fullPage(1)
	require.Equal(t, point(want), b.Head, "a full page's Head is the log's last event")
}

// A tailing cursor carries no snapshot and works as an AppendIf After by log
// order: nothing new passes, a new matching event fails the append.
func testTailCursorAsCondition(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	q := query.Tagged(nil, "doc=d1")
	appendOK(t, s, ev("Edited", 1, "doc=d1"), ev("Edited", 2, "doc=d1"))
	_, cur := tailChecked(t, s, q, cursor.Start, 0, 2)
	_, err := s.AppendIf(ctx, []pgdcb.Event{ev("Edited", 3, "doc=d1")}, appendif.FailIf(q, &cur))
	require.NoError(t, err, "the tailing cursor saw every matching event")
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("Edited", 4, "doc=d1")}, appendif.FailIf(q, &cur))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "the event appended after the cursor is unseen")
	// And as a ReadOptions.After.
	rest, _, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{After: &cur})
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.JSONEq(t, "3", string(rest[0].Data))
}

// Listen wakes once when it starts and again after an append commits; it
// returns ctx's error when ctx ends.
func testListen(t testing.TB, s pgdcb.Store, _ Options) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	woke := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-woke:
		case err := <-done:
			require.NoError(t, err, "Listen returned while waiting for %s", what)
		case <-time.After(tailTimeout):
			require.Fail(t, "no wake-up", what)
		}
	}
	wait("the first wake-up")
	for i := range 3 {
		for len(woke) > 0 { // spurious wake-ups are allowed
			<-woke
		}
		appendOK(t, s, ev("E", i, "k=v"))
		wait(fmt.Sprintf("the wake-up after append %d", i))
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(tailTimeout):
		require.Fail(t, "Listen did not return after its context ended")
	}
}
