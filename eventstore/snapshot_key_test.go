package eventstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

// Versions of 2^31 or more are stored whole: a model of version 2^32+1 never
// lends its snapshot to version 1 (truncated to int32, it was stored as 1),
// and a timestamp-style version finds its own snapshots.
func TestSnapshotVersionsStoredWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, &eventstore.Config{SnapshotsManual: true})
	q := query.Tagged(nil, "v=1")
	appendN(t, s, 10, "v=1")
	full := foldModel(q)
	_, err := s.Project(ctx, full)
	require.NoError(t, err)

	// A different fold under the big version: its snapshot must not serve version 1.
	big := pgdcb.NewModel(q, foldState{}, func(st foldState, ev pgdcb.StoredEvent) foldState {
		st.Sum += 1000
		return st
	}).WithSnapshots("bigver", 1<<32+1)
	saveCurrent(t, s, pool, q, func() pgdcb.Snapshottable { return big }, "bigver", 1<<32+1)
	v1 := foldModel(q).WithSnapshots("bigver", 1)
	before := s.SnapshotStats()
	_, err = s.Project(ctx, v1)
	require.NoError(t, err)
	require.Equal(t, full.State, v1.State, "version 1 folds from the start, not from version 2^32+1's snapshot")
	require.Equal(t, before.Loaded, s.SnapshotStats().Loaded)
	require.Equal(t, before.IgnoredVersion+1, s.SnapshotStats().IgnoredVersion)

	// A timestamp-style version uses its own snapshot.
	const stamp = 202611251200
	saveCurrent(t, s, pool, q, func() pgdcb.Snapshottable { return foldModel(q).WithSnapshots("stamped", stamp) }, "stamped", stamp)
	m := foldModel(q).WithSnapshots("stamped", stamp)
	before = s.SnapshotStats()
	_, err = s.Project(ctx, m)
	require.NoError(t, err)
	require.Equal(t, full.State, m.State)
	require.Equal(t, before.Loaded+1, s.SnapshotStats().Loaded, "its own snapshot was loaded")
}

// A snapshot name with NUL, invalid UTF-8 or over MaxSnapshotNameBytes is
// refused with a typed error before any statement: the caller's transaction
// stays usable, and the pool's Project does not run silently without
// snapshots.
func TestSnapshotNameValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	q := query.Tagged(nil, "n=1")
	appendN(t, s, 2, "n=1")
	for _, name := range []string{"a\x00b", "bad\xffutf8", strings.Repeat("n", storekit.MaxSnapshotNameBytes+1)} {
		require.Error(t, storekit.ValidateSnapshotName(name))
		_, err := s.Project(ctx, snapModel(q, name))
		require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, "%q", name)
		var ae *pgdcb.InvalidArgumentError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, "snapshot name", ae.Name)
		require.ErrorIs(t, s.SaveSnapshot(ctx, snapModel(q, name)), pgdcb.ErrInvalidArgument)

		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = s.ProjectTx(ctx, tx, snapModel(q, name))
		require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
		var one int
		require.NoError(t, tx.QueryRow(ctx, "SELECT 1").Scan(&one), "the caller's transaction is not aborted")
		require.NoError(t, tx.Rollback(ctx))
	}
	require.NoError(t, storekit.ValidateSnapshotName(strings.Repeat("n", storekit.MaxSnapshotNameBytes)))
	require.NoError(t, storekit.ValidateSnapshotName(""))
}

// saveCurrent saves the model's snapshot until the stored row (name,
// version) covers q's last event: a transaction of another test may hold
// the horizon below it for a while (the snapshot's point is below the
// horizon). It fails after a deadline.
func saveCurrent(t *testing.T, s *eventstore.Store, pool *pgxpool.Pool, q query.Query, model func() pgdcb.Snapshottable, name string, version int64) {
	t.Helper()
	ctx := context.Background()
	last, _, err := s.ReadLast(ctx, q)
	require.NoError(t, err)
	await.Until(t, time.Minute, func() (bool, string) {
		require.NoError(t, s.SaveSnapshot(ctx, model()))
		var pos int64
		err := pool.QueryRow(ctx, `SELECT position FROM `+ident.Schema(s)+`.decision_snapshots WHERE name = $1 AND version = $2`,
			name, version).Scan(&pos)
		return err == nil && pos == last.Position, fmt.Sprintf("snapshot of %s v%d at %d, want %d (%v)", name, version, pos, last.Position, err)
	})
}
