package subscription_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// A subscription runs on the in-memory store: it catches up in batches, then
// follows new events, woken by the store's Listen. The poll interval is an
// hour, so the live events arrive only through wake-ups.
func TestSubscriptionOnMemstore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.MustNew(nil)
	q := query.Tagged([]string{"Item"}, "list=a")
	appendItems := func(from, n int) {
		for i := range n {
			_, err := s.Append(ctx, []pgdcb.Event{
				pgdcb.MustEvent("Item", from+i, "list=a"),
				pgdcb.MustEvent("Item", from+i, "list=b"),
			})
			require.NoError(t, err)
		}
	}
	appendItems(0, 25)

	sub, err := subscription.New(s, q, &subscription.Config{BatchSize: 10, PollInterval: time.Hour})
	require.NoError(t, err)
	var c collector
	stop := run(t, sub, cursor.Start, c.handle)
	require.Eventually(t, func() bool { return c.len() == 25 }, wait, time.Millisecond, "catch-up")

	appendItems(25, 5) // live: no poll for an hour, only wake-ups
	require.Eventually(t, func() bool { return c.len() == 30 }, wait, time.Millisecond, "live events after a wake-up")
	require.ErrorIs(t, stop(), context.Canceled)

	evs := c.events()
	requireLogOrder(t, evs)
	for i, ev := range evs {
		require.JSONEq(t, string(pgdcb.MustEvent("Item", i).Data), string(ev.Data), "event %d", i)
		require.True(t, q.Matches(ev.Type, ev.Tags))
	}
	// The checkpoint resumes after the last delivered event: nothing again.
	var again collector
	sub2, err := subscription.New(s, q, &subscription.Config{PollInterval: time.Hour})
	require.NoError(t, err)
	stop2 := run(t, sub2, c.cur, again.handle)
	appendItems(30, 1)
	require.Eventually(t, func() bool { return again.len() == 1 }, wait, time.Millisecond)
	require.ErrorIs(t, stop2(), context.Canceled)
	require.JSONEq(t, "30", string(again.events()[0].Data))
}
