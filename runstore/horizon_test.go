package runstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/pgtest"
	"github.com/pgdcb/pgdcb/internal/teststore"
	"github.com/pgdcb/pgdcb/runstore"
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
	deadline := time.Now().Add(time.Second)
	for id, seq := range want {
		for {
			snap, err := rs.GetSnapshot(ctx, id)
			require.NoError(t, err)
			if snap != nil && snap.LastEventSeq == seq {
				require.Equal(t, seq, snap.EventCount, "%s: every event applied once", id)
				break
			}
			require.True(t, time.Now().Before(deadline), "%s: snapshot at %v, want runSeq %d, horizon held", id, snap, seq)
			time.Sleep(10 * time.Millisecond)
		}
	}
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
