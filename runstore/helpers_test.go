package runstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/runstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore returns a runstore in a fresh schema (the core's migrations and
// runstore's), dropped when the test ends. Unless cfg sets a Tracer, its
// Tracer is a runCounts, which registry reads.
func newStore(t testing.TB, cfg *runstore.Config) *runstore.Store {
	t.Helper()
	es := pgdcbtest.NewStore(t, &pgdcbtest.Options{OwnPool: true, Runstore: true})
	var c runstore.Config
	if cfg != nil {
		c = *cfg
	}
	m := &runCounts{resyncs: map[string]float64{}}
	if c.Tracer == nil {
		c.Tracer = m
	}
	s, err := runstore.New(es, &c)
	require.NoError(t, err)
	storeCounts.Store(s, m)
	return s
}

// storeCounts maps each store newStore made to its counts.
var storeCounts sync.Map // *runstore.Store -> *runCounts

// runCounts is a runstore.Tracer and ProjectorTracer counting what
// pgdcbprom.New counts (the pgdcbprom module's tests check
// the Prometheus side).
type runCounts struct {
	mu        sync.Mutex
	projected float64
	resyncs   map[string]float64 // by trigger
}

func (*runCounts) TraceRunAppendStart(ctx context.Context, _ runstore.TraceData) context.Context {
	return ctx
}
func (*runCounts) TraceRunAppendEnd(context.Context, runstore.TraceData) {}
func (*runCounts) TraceRunFetchStart(ctx context.Context, _ runstore.TraceData) context.Context {
	return ctx
}
func (*runCounts) TraceRunFetchEnd(context.Context, runstore.TraceData) {}
func (*runCounts) TraceSnapshotLag(context.Context, runstore.Lag)       {}

func (m *runCounts) TraceProjected(_ context.Context, events int, ahead bool) {
	if !ahead {
		m.mu.Lock()
		m.projected += float64(events)
		m.mu.Unlock()
	}
}

func (m *runCounts) TraceResync(_ context.Context, _, trigger string) {
	m.mu.Lock()
	m.resyncs[trigger]++
	m.mu.Unlock()
}

// metrics reads a store's counts, and its STALE runs as a scrape measures
// them, under the names of pgdcbprom's metrics.
type metrics struct {
	rs *runstore.Store
	c  *runCounts
}

// registry returns the metrics of a store newStore made.
func registry(rs *runstore.Store) *metrics {
	c, _ := storeCounts.Load(rs)
	return &metrics{rs: rs, c: c.(*runCounts)}
}

// resyncs returns the resyncs by trigger.
func (m *metrics) resyncs() map[string]float64 {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	out := map[string]float64{}
	for k, v := range m.c.resyncs {
		out[k] = v
	}
	return out
}

// counter returns the count of pgdcb_runstore_projector_events_total or
// pgdcb_runstore_projector_resyncs_total (all triggers).
func counter(t *testing.T, m *metrics, name string) float64 {
	t.Helper()
	switch name {
	case "pgdcb_runstore_projector_events_total":
		m.c.mu.Lock()
		defer m.c.mu.Unlock()
		return m.c.projected
	case "pgdcb_runstore_projector_resyncs_total":
		sum := 0.0
		for _, v := range m.resyncs() {
			sum += v
		}
		return sum
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// gauge returns pgdcb_runstore_stale_runs as a scrape measures it.
func gauge(t *testing.T, m *metrics, name string) float64 {
	t.Helper()
	require.Equal(t, "pgdcb_runstore_stale_runs", name)
	n, err := m.rs.StaleRunCount(context.Background())
	require.NoError(t, err)
	return float64(n)
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
