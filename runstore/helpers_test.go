package runstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgtest"
	"github.com/pgdcb/pgdcb/internal/teststore"
	"github.com/pgdcb/pgdcb/runstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore returns a runstore in a fresh schema (the core's migrations and
// runstore's), dropped when the test ends.
func newStore(t testing.TB, cfg *runstore.Config) *runstore.Store {
	t.Helper()
	es, pool := teststore.New(t, nil)
	_, err := runstore.Migrate(context.Background(), pool, es.Schema())
	require.NoError(t, err)
	s, err := runstore.New(es, cfg)
	require.NoError(t, err)
	return s
}

// waitLogBelowHorizon waits until every event of rs's log was written by a
// transaction below the cluster's horizon, so that a tailing read (the
// projector's) can see them all. Any open transaction on the shared server
// holds the horizon back; the wait fails after two minutes.
func waitLogBelowHorizon(t testing.TB, rs *runstore.Store) {
	t.Helper()
	es := rs.EventStore()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var below bool
		require.NoError(t, es.Pool().QueryRow(t.Context(), `SELECT coalesce((SELECT max(transaction_id) FROM `+ident.Schema(es)+`.events), '0')
			< pg_snapshot_xmin(pg_current_snapshot())`).Scan(&below))
		if below {
			return
		}
		require.True(t, time.Now().Before(deadline), "the cluster's horizon stayed behind the log for 2 minutes")
		time.Sleep(10 * time.Millisecond) // a poll of observable state, bounded by the deadline
	}
}
