package pgdcbtest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

func TestProgressWaitsForASubscription(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil)
	sub, err := subscription.New(store, query.Tagged(nil, "wallet=a"), &subscription.Config{PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	var (
		mu   sync.Mutex
		seen []pgdcb.StoredEvent
		p    pgdcbtest.Progress
	)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, cursor.Start, p.Track(func(_ context.Context, b subscription.Batch) error {
			time.Sleep(20 * time.Millisecond) // a slow handler: WaitFor must wait for it
			mu.Lock()
			seen = append(seen, b.Events...)
			mu.Unlock()
			return nil
		}))
	}()
	defer func() { cancel(); require.ErrorIs(t, <-done, context.Canceled) }()

	for i := range 3 {
		res, err := store.Append(t.Context(), []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"n": i}, "wallet=a")})
		require.NoError(t, err)
		p.WaitFor(t, pgdcbtest.CursorOf(res))
		mu.Lock()
		n := len(seen)
		mu.Unlock() // before asserting: a failed assertion must not leave the handler blocked
		require.Equal(t, i+1, n, "every event up to the append was handled")
	}
}

func TestWaitForProjection(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil)
	var mu sync.Mutex
	count := 0
	r, err := projection.New(store, "count", query.Tagged(nil, "wallet=a"),
		func(_ context.Context, _ pgx.Tx, evs []pgdcb.StoredEvent) error {
			mu.Lock()
			count += len(evs)
			mu.Unlock()
			return nil
		}, &projection.Config{ReaderConfig: projection.ReaderConfig{PollInterval: 20 * time.Millisecond}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	res, err := store.Append(t.Context(), []pgdcb.Event{
		pgdcb.MustEvent("Deposited", nil, "wallet=a"), pgdcb.MustEvent("Deposited", nil, "wallet=a")})
	require.NoError(t, err)
	pgdcbtest.WaitForProjection(t, r, pgdcbtest.CursorOf(res))
	mu.Lock()
	n := count
	mu.Unlock()
	require.Equal(t, 2, n)
}

func TestWaitForFailsNamingWhereTheReaderIs(t *testing.T) {
	t.Parallel()
	target := cursor.Cursor{TransactionID: 10, Position: 5}
	failures := (&pgtest.Recorder{TB: t}).Run(func(ft testing.TB) {
		pgdcbtest.WaitFor(ft, target, func(context.Context) (cursor.Cursor, error) { return cursor.Start, errors.New("boom") })
	})
	require.Len(t, failures, 1)
	require.Contains(t, failures[0], "boom")

	require.True(t, pgdcbtest.CaughtUp(cursor.Cursor{TransactionID: 10, Position: 5}, target))
	require.True(t, pgdcbtest.CaughtUp(cursor.Cursor{TransactionID: 11, Position: 1}, target))
	require.False(t, pgdcbtest.CaughtUp(cursor.Cursor{TransactionID: 10, Position: 4}, target))
	require.Equal(t, cursor.Cursor{TransactionID: 7, Position: 3},
		pgdcbtest.CursorOf(pgdcb.AppendResult{TransactionID: 7, Positions: []int64{2, 3}}))
}
