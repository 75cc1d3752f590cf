package projection_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// startPair starts a pair of the test's own (it crashes or promotes it),
// with synchronous_commit on and the standby d behind.
func startPair(t *testing.T, ctx context.Context, d time.Duration) *pgtest.Pair {
	t.Helper()
	pair, err := pgtest.StartPair(ctx, pgserver.Options{Settings: map[string]string{"synchronous_commit": "on"}},
		pgserver.StandbyOptions{ApplyDelay: d})
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = pair.Close() })
	return pair
}

// seqRM creates the read model rm (seq, position, type) in schema: seq
// numbers the rows in the order their batches committed, so order shows.
func seqRM(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `CREATE TABLE `+schema+`.rm (seq bigserial, position bigint NOT NULL, type text NOT NULL)`)
	require.NoError(t, err)
}

// requireOnceInOrder: rm on pool holds each event of the log on pool matching
// q once, in log order.
func requireOnceInOrder(t *testing.T, ctx context.Context, pool *pgxpool.Pool, schema string, q query.Query) int {
	t.Helper()
	s, err := eventstore.New(pool, &eventstore.Config{Schema: schema, NotifyDisabled: true})
	require.NoError(t, err)
	defer s.Close(context.Background())
	all, _, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `SELECT position FROM `+schema+`.rm ORDER BY seq`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	want := make([]int64, len(all))
	for i, e := range all {
		want[i] = e.Position
	}
	require.Equal(t, want, got, "the read model holds every event of the log once, in log order")
	return len(all)
}

// runUntilStopped runs r until the returned stop is called (also when the
// test ends), which returns once Run did.
func runUntilStopped(t *testing.T, ctx context.Context, r *projection.Runner) (stop func()) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// A projection on a store whose reads go to a standby 50 ms behind
// (eventstore.Config.ReadPool): its batches read the standby (with replay
// paused, a step reads nothing although the primary holds the event), and
// its handler and checkpoint commit on the primary. Through a standby crash
// and a primary crash, under a writer, the read model on the primary holds
// every committed event once, in log order.
func TestStandbyProjectionThroughCrashes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pair := startPair(t, ctx, 50*time.Millisecond)
	pp, sp, schema := pair.Migrated(t)
	seqRM(t, pp, schema)
	require.NoError(t, pair.Sync(ctx))
	store, err := eventstore.New(pp, &eventstore.Config{Schema: schema, ReadPool: sp, SettleTimeout: 30 * time.Second})
	require.NoError(t, err)
	defer store.Close(context.Background())
	q := query.Tagged([]string{"P"})
	r, err := projection.New(store, "rm", q, insertRows(schema), &projection.Config{ReaderConfig: projection.ReaderConfig{
		PollInterval: 20 * time.Millisecond, ElectionInterval: 50 * time.Millisecond,
		RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, MaxAttempts: projection.RetryForever}})
	require.NoError(t, err)

	// The batch reads the standby: with its replay paused it shows nothing
	// of an event the primary committed.
	require.NoError(t, pair.Standby.PauseReplay(ctx))
	_, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("P", -1, "k=v")})
	require.NoError(t, err)
	st, err := r.Step(ctx)
	require.NoError(t, err)
	require.True(t, st.Led)
	require.Zero(t, st.Events, "the step read the standby, whose replay is paused")
	require.NoError(t, pair.Standby.ResumeReplay(ctx))
	require.NoError(t, pair.Sync(ctx))
	st, err = r.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Events, "the standby shows the event once replayed")

	stop := runUntilStopped(t, ctx, r)
	stopWriter := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 0; ; i++ {
			select {
			case <-stopWriter:
				return
			default:
			}
			// Failures during the crashes are expected: the log on the
			// primary is the reference, not the writer.
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = store.Append(wctx, []pgdcb.Event{pgdcb.MustEvent("P", i, "k=v")})
			wcancel()
		}
	}()
	// Each phase lasts until the projection applied a few more events.
	appliedAtLeast := func(n int) int {
		var got int
		require.Eventually(t, func() bool {
			return pp.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.rm`).Scan(&got) == nil && got >= n
		}, time.Minute, 10*time.Millisecond, "the projection applies (%d)", n)
		return got
	}
	n := appliedAtLeast(20)
	require.NoError(t, pair.Standby.Crash(ctx))
	require.NoError(t, pair.Standby.Start(ctx))
	n = appliedAtLeast(n + 20)
	require.NoError(t, pair.Primary.Crash(ctx))
	require.NoError(t, pair.Primary.Start(ctx))
	appliedAtLeast(n + 20)
	close(stopWriter)
	<-writerDone

	onPrimary, err := eventstore.New(pp, &eventstore.Config{Schema: schema, NotifyDisabled: true})
	require.NoError(t, err)
	defer onPrimary.Close(context.Background())
	all, _, err := onPrimary.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	last := all[len(all)-1]
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	require.NoError(t, r.WaitFor(wctx, cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}))
	wcancel()
	stop()
	got := requireOnceInOrder(t, ctx, pp, schema, q)
	t.Logf("%d events, each applied once in log order through a standby crash and a primary crash", got)
}

// stepUntilCaughtUp runs steps until one reads nothing and leaves the
// checkpoint at the last event of the log matching q on the store's primary.
func stepUntilCaughtUp(t *testing.T, ctx context.Context, r *projection.Runner, s *eventstore.Store, q query.Query) {
	t.Helper()
	_, head, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	for {
		st, err := r.Step(ctx)
		require.NoError(t, err)
		require.True(t, st.Led)
		c := st.Batch.Cursor
		if st.Events == 0 && cursor.Compare(c.TransactionID, c.Position, head.TransactionID, head.Position) >= 0 {
			return
		}
		require.NoError(t, ctx.Err())
	}
}

// Readers after a failover to a standby that was behind: a projection whose
// checkpoint moved on the old primary past what the standby received,
// restarted from its stored checkpoint on the promoted standby, applies
// every event of the new primary's log once, in order, including the events
// appended after the failover that took transaction ids the old primary had
// used. Negative control: the old primary's tail cursor kept in memory skips
// those events on the new primary.
func TestStandbyFailoverReaderCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pair := startPair(t, ctx, 500*time.Millisecond)
	pp, _, schema := pair.Migrated(t)
	seqRM(t, pp, schema)
	old, err := eventstore.New(pp, &eventstore.Config{Schema: schema, NotifyDisabled: true})
	require.NoError(t, err)
	defer old.Close(context.Background())
	q := query.Tagged([]string{"P"})
	cfg := &projection.Config{ReaderConfig: projection.ReaderConfig{NotifyDisabled: true}}
	r, err := projection.New(old, "rm", q, insertRows(schema), cfg)
	require.NoError(t, err)
	appendN(t, old, "P", 10, 2)
	stepUntilCaughtUp(t, ctx, r, old, q)
	require.NoError(t, pair.Sync(ctx))

	// The standby stops receiving; the projection moves on the old primary.
	require.NoError(t, pair.Standby.Detach(ctx, pair.Primary))
	appendN(t, old, "P", 20, 1)
	stepUntilCaughtUp(t, ctx, r, old, q)
	st, err := r.Status(ctx)
	require.NoError(t, err)
	inMemory := st.Cursor // what a reader keeping its cursor in memory holds

	require.NoError(t, pair.Primary.Crash(ctx))
	require.NoError(t, pair.Standby.Promote(ctx))
	np, err := pgtest.NewPool(ctx, pair.Standby.DSN())
	require.NoError(t, err)
	defer np.Close()
	s, err := eventstore.New(np, &eventstore.Config{Schema: schema, NotifyDisabled: true})
	require.NoError(t, err)
	defer s.Close(context.Background())
	var fresh []pgdcb.AppendResult
	for i := range 5 {
		res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("P", i, "k=new")})
		require.NoError(t, err)
		fresh = append(fresh, res)
	}
	t.Logf("old primary's checkpoint at transaction %d; the new primary's events got %d..%d",
		inMemory.TransactionID, fresh[0].TransactionID, fresh[len(fresh)-1].TransactionID)
	require.Less(t, fresh[len(fresh)-1].TransactionID, inMemory.TransactionID, "the failover hands out the old ids again (the test's premise)")

	// Negative control: the cursor kept in memory skips the new events.
	tb, err := s.ReadTail(ctx, q, inMemory, 0)
	require.NoError(t, err)
	require.Empty(t, tb.Events, "a tail cursor from the old primary sorts after the new events")

	// The stored checkpoint on the new primary is one its log holds.
	r2, err := projection.New(s, "rm", q, insertRows(schema), cfg)
	require.NoError(t, err)
	st2, err := r2.Status(ctx)
	require.NoError(t, err)
	require.Less(t, st2.Cursor.TransactionID, fresh[0].TransactionID, "the promoted standby's checkpoint is before the failover")
	stepUntilCaughtUp(t, ctx, r2, s, q)
	n := requireOnceInOrder(t, ctx, np, schema, q)
	require.Equal(t, 15, n, "10 events the standby received, 5 appended after the failover")
}
