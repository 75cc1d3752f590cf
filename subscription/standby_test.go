package subscription_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
	"github.com/pgdcb/pgdcb/subscription"
)

// A subscription on a store whose reads go to a standby 50 ms behind
// (eventstore.Config.ReadPool; LISTEN stays on the primary) while appends
// run, through a standby crash and a primary crash: every committed event is
// delivered once, in log order.
func TestStandbySubscriptionThroughCrashes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pair, err := pgtest.StartPair(ctx, pgserver.Options{Settings: map[string]string{"synchronous_commit": "on"}},
		pgserver.StandbyOptions{ApplyDelay: 50 * time.Millisecond})
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip(err)
	}
	require.NoError(t, err)
	defer pair.Close()
	pp, sp := pair.Pools(t)
	schema := pair.Schema(t)
	_, err = pgdcbsql.Migrate(ctx, pp, schema)
	require.NoError(t, err)
	require.NoError(t, pair.Sync(ctx))
	store, err := eventstore.New(pp, &eventstore.Config{Schema: schema, ReadPool: sp, SettleTimeout: 30 * time.Second})
	require.NoError(t, err)
	defer store.Close(context.Background())

	q := query.Tagged(nil, "k=v")
	sub, err := subscription.New(store, q, &subscription.Config{PollInterval: 20 * time.Millisecond,
		RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	require.NoError(t, err)
	var (
		mu        sync.Mutex
		delivered []pgdcb.StoredEvent
	)
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() {
		runDone <- sub.Run(runCtx, cursor.Start, func(_ context.Context, b subscription.Batch) error {
			mu.Lock()
			delivered = append(delivered, b.Events...)
			mu.Unlock()
			return nil
		})
	}()

	// A writer appends until told to stop; failures during the primary's
	// crash are expected (the final log is the reference, not the writer).
	stopWriter := make(chan struct{})
	writerDone := make(chan int, 1)
	go func() {
		ok := 0
		for i := 0; ; i++ {
			select {
			case <-stopWriter:
				writerDone <- ok
				return
			default:
			}
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := store.Append(wctx, []pgdcb.Event{pgdcb.MustEvent("E", i, "k=v")}); err == nil {
				ok++
			}
			wcancel()
		}
	}()
	// Each phase lasts until the subscription delivered a few more events.
	deliveredAtLeast := func(n int) {
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(delivered) >= n },
			time.Minute, 10*time.Millisecond, "the subscription delivers (%d)", n)
	}
	deliveredAtLeast(20)
	require.NoError(t, pair.Standby.Crash(ctx))
	require.NoError(t, pair.Standby.Start(ctx))
	mu.Lock()
	n := len(delivered)
	mu.Unlock()
	deliveredAtLeast(n + 20)
	require.NoError(t, pair.Primary.Crash(ctx))
	require.NoError(t, pair.Primary.Start(ctx))
	mu.Lock()
	n = len(delivered)
	mu.Unlock()
	deliveredAtLeast(n + 20)
	close(stopWriter)
	written := <-writerDone

	// The reference: the log on the primary; wait until the subscription
	// passed its last event.
	onPrimary, err := eventstore.New(pp, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	all, _, err := onPrimary.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.NotEmpty(t, all)
	last := all[len(all)-1]
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	require.NoError(t, sub.WaitFor(wctx, cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}))
	wcancel()
	stop()
	<-runDone
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, delivered, len(all), "every committed event delivered once")
	for i := range all {
		require.Equal(t, all[i].Position, delivered[i].Position, "in log order (event %d)", i)
	}
	t.Logf("%d events committed (%d appends answered ok), all delivered once in order through a standby crash and a primary crash", len(all), written)
}
