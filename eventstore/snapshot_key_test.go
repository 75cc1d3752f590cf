package eventstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// Versions of 2^31 or more are stored whole: a model of version 2^32+1 never
// lends its snapshot to version 1 (truncated to int32, it was stored as 1),
// and a timestamp-style version finds its own snapshots.
func TestSnapshotVersionsStoredWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, &eventstore.Config{SnapshotsManual: true})
	q := query.Tagged(nil, "v=1")
	appendN(t, s, 10, "v=1")
	full := foldModel(q)
	_, err := s.Project(ctx, full)
	require.NoError(t, err)

	// A different fold under the big version: its snapshot must not serve version 1.
	big := eventstore.NewModel(q, foldState{}, func(st foldState, ev eventstore.StoredEvent) foldState {
		st.Sum += 1000
		return st
	}).WithSnapshots("bigver", 1<<32+1)
	require.NoError(t, s.SaveSnapshot(ctx, big))
	v1 := foldModel(q).WithSnapshots("bigver", 1)
	before := s.SnapshotStats()
	_, err = s.Project(ctx, v1)
	require.NoError(t, err)
	require.Equal(t, full.State, v1.State, "version 1 folds from the start, not from version 2^32+1's snapshot")
	require.Equal(t, before.Loaded, s.SnapshotStats().Loaded)
	require.Equal(t, before.IgnoredVersion+1, s.SnapshotStats().IgnoredVersion)

	// A timestamp-style version uses its own snapshot.
	const stamp = 202611251200
	require.NoError(t, s.SaveSnapshot(ctx, foldModel(q).WithSnapshots("stamped", stamp)))
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
	for _, name := range []string{"a\x00b", "bad\xffutf8", strings.Repeat("n", eventstore.MaxSnapshotNameBytes+1)} {
		require.Error(t, eventstore.ValidateSnapshotName(name))
		_, err := s.Project(ctx, snapModel(q, name))
		require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, "%q", name)
		var ne *eventstore.InvalidSnapshotNameError
		require.ErrorAs(t, err, &ne)
		require.Equal(t, name, ne.Name)
		require.ErrorIs(t, s.SaveSnapshot(ctx, snapModel(q, name)), pgdcb.ErrInvalidArgument)

		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = s.ProjectTx(ctx, tx, snapModel(q, name))
		require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
		var one int
		require.NoError(t, tx.QueryRow(ctx, "SELECT 1").Scan(&one), "the caller's transaction is not aborted")
		require.NoError(t, tx.Rollback(ctx))
	}
	require.NoError(t, eventstore.ValidateSnapshotName(strings.Repeat("n", eventstore.MaxSnapshotNameBytes)))
	require.NoError(t, eventstore.ValidateSnapshotName(""))
}
