package runstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/tags"
)

// A transaction holding an id open elsewhere in the cluster (a batch job, a
// session idle in transaction) holds the tailing horizon for the whole run;
// snapshots still follow their runs within the contract's second, because a
// run's events commit in runSeq order and the projector applies them
// contiguously beyond the horizon. Before the change, no snapshot advanced
// until the transaction ended. After it ends, the tail passes the same events
// and applies nothing twice.
func TestSnapshotsFollowRunsWhileTheHorizonIsHeld(t *testing.T) {
	rs := newStore(t, &runstore.Config{PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Runs that exist before the horizon is held, and runs that start after.
	const runs, perRun = 6, 40
	for r := range runs / 2 {
		_, err := rs.AppendEvent(ctx, runEvent(fmt.Sprint("run-", r), "k0"))
		require.NoError(t, err)
	}
	require.NoError(t, rs.CatchUp(ctx))

	held, err := pgtest.Pool(t).Begin(ctx)
	require.NoError(t, err)
	defer held.Rollback(context.Background())
	require.NoError(t, held.QueryRow(ctx, "SELECT pg_current_xact_id() IS NOT NULL").Scan(new(bool)))

	projCtx, stopProj := context.WithCancel(ctx)
	projDone := make(chan error, 1)
	go func() { projDone <- rs.Projector().Run(projCtx) }()
	defer func() { stopProj(); <-projDone }()

	want := map[string]int64{}
	for i := 1; i < perRun; i++ {
		for r := range runs {
			id := fmt.Sprint("run-", r)
			res, err := rs.AppendEvent(ctx, runEvent(id, fmt.Sprint("k", i)))
			require.NoError(t, err)
			want[id] = res.RunSeq
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Within the contract's second of the last append, every snapshot holds
	// every event, with the horizon still held.
	await.Until(t, time.Second, func() (bool, string) {
		for id, seq := range want {
			snap, err := rs.GetSnapshot(ctx, id)
			require.NoError(t, err)
			if snap == nil || snap.LastEventSeq != seq {
				return false, fmt.Sprintf("%s: snapshot at %v, want runSeq %d, horizon held", id, snap, seq)
			}
			require.Equal(t, seq, snap.EventCount, "%s: every event applied once", id)
		}
		return true, ""
	})
	lag, err := rs.SnapshotLag(ctx)
	require.NoError(t, err)
	require.Less(t, lag.Lag, time.Second, "lag counts what the snapshots miss, not the held horizon")

	// The horizon moves: the tail passes the events again and applies none twice.
	require.NoError(t, held.Rollback(ctx))
	require.NoError(t, rs.CatchUp(ctx))
	for id, seq := range want {
		snap, err := rs.GetSnapshot(ctx, id)
		require.NoError(t, err)
		require.Equal(t, seq, snap.LastEventSeq)
		require.Equal(t, seq, snap.EventCount, "%s: nothing applied twice", id)
		full, err := rs.ProjectSnapshot(ctx, id)
		require.NoError(t, err)
		require.Equal(t, full.LastEventSeq, snap.LastEventSeq)
		require.Equal(t, full.EventCount, snap.EventCount)
		require.Equal(t, full.Status, snap.Status)
	}
}

// CatchUp returns once the snapshots hold every event committed before the
// call, while a transaction of another database of the cluster holds an xid
// for the whole call (before the horizon left other databases out, CatchUp
// never returned: it waited for the cluster-wide xmin to pass the head).
// The store lives in a throwaway database (the default one is shared with
// other packages' tests); the open transaction runs in a second one.
func TestCatchUpIsNotHeldByAnotherDatabase(t *testing.T) {
	pool, _ := pgtest.PoolOnOtherDatabase(t)
	es := teststore.OnPool(t, pool, nil)
	_, err := runstore.Migrate(context.Background(), pool, es.Schema())
	require.NoError(t, err)
	rs, err := runstore.New(es, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	held := pgtest.HoldXID(t, pgtest.OtherDatabase(t))
	want := map[string]int64{}
	for i := range 5 {
		for r := range 3 {
			id := fmt.Sprint("run-", r)
			res, err := rs.AppendEvent(ctx, runEvent(id, fmt.Sprint("k", i)))
			require.NoError(t, err)
			want[id] = res.RunSeq
		}
	}
	require.NoError(t, rs.CatchUp(ctx), "CatchUp returns while another database's transaction is open")
	running, err := held.Running(ctx)
	require.NoError(t, err)
	require.True(t, running, "the other database's transaction was still open when CatchUp returned")
	for id, seq := range want {
		snap, err := rs.GetSnapshot(ctx, id)
		require.NoError(t, err)
		require.NotNil(t, snap, id)
		require.Equal(t, seq, snap.LastEventSeq, id)
		require.Equal(t, seq, snap.EventCount, id)
	}
}

// isolatedStore returns a runstore in a throwaway database of its own, so that
// no transaction of other packages' tests (they run in the default database)
// holds its tail, and that database's DSN.
func isolatedStore(t *testing.T, cfg *runstore.Config) (*runstore.Store, string) {
	t.Helper()
	pool, dsn := pgtest.PoolOnOtherDatabase(t)
	es := teststore.OnPool(t, pool, nil)
	_, err := runstore.Migrate(context.Background(), pool, es.Schema())
	require.NoError(t, err)
	rs, err := runstore.New(es, cfg)
	require.NoError(t, err)
	return rs, dsn
}

// requireReflected requires every run's snapshot to hold its events up to
// the given runSeq, each once.
func requireReflected(t *testing.T, rs *runstore.Store, want map[string]int64) {
	t.Helper()
	for id, seq := range want {
		snap, err := rs.GetSnapshot(context.Background(), id)
		require.NoError(t, err)
		require.NotNil(t, snap, id)
		require.Equal(t, seq, snap.LastEventSeq, id)
		require.Equal(t, seq, snap.EventCount, id)
	}
}

// CatchUp returns once the snapshots hold every run event committed before
// the call, while a transaction of the store's OWN database holds an xid
// older than every appended event for the whole test: first with no
// projector running (CatchUp projects itself, beyond the held horizon), then
// beside a running projector (CatchUp watches the snapshots the leader
// writes). Before, CatchUp waited for the tail's checkpoint to reach the last
// run event, which the held horizon kept from it: it never returned while
// the transaction was open (here: its 30 s deadline).
func TestCatchUpIsNotHeldBySameDatabaseTransaction(t *testing.T) {
	rs, dsn := isolatedStore(t, &runstore.Config{PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := rs.AppendEvent(ctx, runEvent("run-0", "k-before"))
	require.NoError(t, err)
	held := pgtest.HoldXID(t, dsn) // older than every event appended below
	want := map[string]int64{}
	appendRuns := func(round int) {
		for i := range 5 {
			for r := range 3 {
				id := fmt.Sprint("run-", r)
				res, err := rs.AppendEvent(ctx, runEvent(id, fmt.Sprint("k", round, "-", i)))
				require.NoError(t, err)
				want[id] = res.RunSeq
			}
		}
	}
	catchUp := func(what string) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		require.NoError(t, rs.CatchUp(cctx), "%s: CatchUp returns while a transaction of the same database is open", what)
		running, err := held.Running(ctx)
		require.NoError(t, err)
		require.True(t, running, "%s: the transaction was still open when CatchUp returned", what)
		requireReflected(t, rs, want)
	}

	appendRuns(1)
	catchUp("no projector running")

	runLeadingProjector(t, ctx, rs)
	appendRuns(2)
	catchUp("beside a running projector")
}

// A run event committed before the call that the projector cannot apply
// beyond the horizon (its run has a gap: runSeq 2 is written, around
// AppendEvent, by a transaction still open) makes CatchUp wait: it returns
// ctx's error while the gap is open, having applied meanwhile what it could
// (another run's events, appended after a second open transaction took its
// xid), and returns once the blocker commits, although that second
// transaction of the same database (newer than the blocked event, older
// than the other run's events) stays open for the whole test. Before,
// CatchUp waited for the tail to pass the other run's events, which that
// transaction holds back: it never returned.
func TestCatchUpWaitsForAnEventItCannotApplyYet(t *testing.T) {
	rs, dsn := isolatedStore(t, nil)
	es := rs.EventStore()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := rs.AppendEvent(ctx, runEvent("g", "k1"))
	require.NoError(t, err)
	require.NoError(t, rs.CatchUp(ctx))

	// The blocker writes runSeq 2 of g and stays open; runSeq 3 commits.
	blocker, err := es.Pool().Begin(ctx)
	require.NoError(t, err)
	defer blocker.Rollback(context.Background())
	second := runEvent("g", "k2")
	second.RunSeq = 2
	_, err = es.AppendTx(ctx, blocker, []pgdcb.Event{runEventRow(t, second, tags.Must("fixture", "gap"))})
	require.NoError(t, err)
	third := runEvent("g", "k3")
	third.RunSeq = 3
	writeRunEventAt(t, es, third)

	// Open for the whole test, newer than runSeq 3, older than run h.
	held := pgtest.HoldXID(t, dsn)
	for _, k := range []string{"k1", "k2"} {
		_, err := rs.AppendEvent(ctx, runEvent("h", k))
		require.NoError(t, err)
	}

	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	err = rs.CatchUp(wctx)
	wcancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "CatchUp waits while runSeq 3 of g cannot be applied")
	requireReflected(t, rs, map[string]int64{"g": 1, "h": 2})

	result := make(chan error, 1)
	go func() { result <- rs.CatchUp(ctx) }()
	require.NoError(t, blocker.Commit(ctx))
	select {
	case err := <-result:
		require.NoError(t, err, "CatchUp returns once the blocker committed")
	case <-ctx.Done():
		t.Fatal("CatchUp did not return after the blocker committed")
	}
	running, err := held.Running(ctx)
	require.NoError(t, err)
	require.True(t, running, "the newer transaction was still open when CatchUp returned")
	requireReflected(t, rs, map[string]int64{"g": 3, "h": 2})
}
