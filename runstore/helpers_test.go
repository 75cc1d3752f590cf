package runstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/runstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore returns a runstore in a fresh schema (the core's migrations and
// runstore's), dropped when the test ends. Unless cfg sets a Tracer, its
// Tracer is a pgdcbprom.RunstoreMetrics, whose collectors collectors returns.
func newStore(t testing.TB, cfg *runstore.Config) *runstore.Store {
	t.Helper()
	es := pgdcbtest.NewStore(t, &pgdcbtest.Options{OwnPool: true, Runstore: true})
	var c runstore.Config
	if cfg != nil {
		c = *cfg
	}
	m := pgdcbprom.NewRunstoreMetrics()
	if c.Tracer == nil {
		c.Tracer = m
	}
	s, err := runstore.New(es, &c)
	require.NoError(t, err)
	storeMetrics.Store(s, m)
	return s
}

// storeMetrics maps each store newStore made to its metrics.
var storeMetrics sync.Map // *runstore.Store -> *pgdcbprom.RunstoreMetrics

// collectors returns the Prometheus collectors of a store newStore made.
func collectors(s *runstore.Store) []prometheus.Collector {
	m, _ := storeMetrics.Load(s)
	return m.(*pgdcbprom.RunstoreMetrics).Collectors(s)
}

// waitLogBelowHorizon waits until every event of rs's log was written by a
// transaction below the cluster's horizon, so that a tailing read (the
// projector's) can see them all. Any open transaction on the shared server
// holds the horizon back; the wait fails after two minutes.
func waitLogBelowHorizon(t testing.TB, rs *runstore.Store) {
	t.Helper()
	es := rs.EventStore()
	await.True(t, 2*time.Minute, "the log below the cluster's horizon", func() bool {
		var below bool
		require.NoError(t, es.Pool().QueryRow(t.Context(), `SELECT coalesce((SELECT max(transaction_id) FROM `+ident.Schema(es)+`.events), '0')
			< pg_snapshot_xmin(pg_current_snapshot())`).Scan(&below))
		return below
	})
}

// runLeadingProjector runs rs's projector in the background until the test
// ends and returns once it leads (it wrote its first heartbeat).
func runLeadingProjector(t testing.TB, ctx context.Context, rs *runstore.Store) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rs.Projector().Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	require.Eventually(t, func() bool {
		st, err := rs.Projector().Status(ctx)
		return err == nil && !st.HeartbeatAt.IsZero()
	}, time.Minute, 5*time.Millisecond)
}
