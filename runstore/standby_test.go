package runstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/runstore"
)

// The snapshot projector of a store whose reads go to a standby
// (eventstore.Config.ReadPool): CatchUp brings the snapshots up to date from
// the standby; a batch reads the standby (with replay paused it reads
// nothing of a run event the primary committed); and a batch never applies
// events a DeleteRun removed on the primary before the batch took the
// projector's lock, although the standby still shows them (the batch reads
// once the standby replayed the primary's WAL as of the lock).
func TestStandbyProjectorCatchUp(t *testing.T) {
	pair := pgtest.StandbyPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pp, sp, schema := pair.Migrated(t)
	_, err := runstore.Migrate(ctx, pp, schema)
	require.NoError(t, err)
	require.NoError(t, pair.Sync(ctx))
	es, err := eventstore.New(pp, &eventstore.Config{Schema: schema, ReadPool: sp})
	require.NoError(t, err)
	defer es.Close(context.Background())
	rs, err := runstore.New(es, &runstore.Config{PollInterval: 20 * time.Millisecond,
		Projection: &projection.ReaderConfig{HeartbeatInterval: 200 * time.Millisecond}})
	require.NoError(t, err)
	hasSnapshot := func(runID string) bool {
		var n int
		require.NoError(t, pp.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.run_snapshots WHERE run_id = $1`, runID).Scan(&n))
		return n > 0
	}

	for _, k := range []string{"k1", "k2"} {
		_, err := rs.AppendEvent(ctx, runEvent("r1", k))
		require.NoError(t, err)
	}
	require.NoError(t, rs.CatchUp(ctx))
	require.NoError(t, pair.Sync(ctx))
	require.Equal(t, int64(2), requireCurrent(t, rs, "r1").LastEventSeq)

	// The batch reads the standby.
	require.NoError(t, pair.Standby.PauseReplay(ctx))
	t.Cleanup(func() { _ = pair.Standby.ResumeReplay(context.Background()) })
	_, err = rs.AppendEvent(ctx, runEvent("r1", "k3"))
	require.NoError(t, err)
	st, err := rs.Projector().Step(ctx)
	require.NoError(t, err)
	n := st.Events
	require.Zero(t, n, "the batch read the standby, whose replay is paused")
	require.NoError(t, pair.Standby.ResumeReplay(ctx))
	require.NoError(t, pair.Sync(ctx))

	// The standby shows k3; the primary deletes the run.
	require.NoError(t, pair.Standby.PauseReplay(ctx))
	deleted, err := rs.DeleteRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, int64(3), deleted)
	require.False(t, hasSnapshot("r1"))
	st, err = rs.Projector().Step(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Events, "the batch waits for the standby to replay the deletion")
	require.False(t, hasSnapshot("r1"), "no snapshot for a deleted run")
	require.NoError(t, pair.Standby.ResumeReplay(ctx))

	require.NoError(t, rs.CatchUp(ctx))
	require.False(t, hasSnapshot("r1"), "no snapshot for a deleted run")
	_, err = rs.AppendEvent(ctx, runEvent("r2", "k1"))
	require.NoError(t, err)
	require.NoError(t, rs.CatchUp(ctx))
	require.NoError(t, pair.Sync(ctx))
	require.Equal(t, int64(1), requireCurrent(t, rs, "r2").LastEventSeq)
	require.False(t, hasSnapshot("r1"), "no snapshot for a deleted run")
}
