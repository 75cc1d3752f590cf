package pgdcbprom_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/runstore/conformance"
)

// newRunstore returns a runstore in a fresh schema, dropped when the test
// ends, traced and watched by the Metrics it returns.
func newRunstore(t testing.TB) (*runstore.Store, pgdcbprom.Metrics) {
	t.Helper()
	es, pool := teststore.New(t, nil)
	_, err := runstore.Migrate(context.Background(), pool, es.Schema())
	require.NoError(t, err)
	m := pgdcbprom.New()
	s, err := runstore.New(es, &runstore.Config{Tracer: m})
	require.NoError(t, err)
	m.WatchRunstore(s)
	return s, m
}

func runstoreGauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// The collectors register and report appends and the lag threshold.
func TestRunstoreMetrics(t *testing.T) {
	t.Parallel()
	s, m := newRunstore(t)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	ev := conformance.Event("r", "A", "k")
	for range 2 {
		_, err := s.AppendEvent(context.Background(), ev)
		require.NoError(t, err)
	}
	require.NoError(t, s.CatchUp(context.Background()))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				got[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[name] = m.GetGauge().GetValue()
			}
		}
	}
	require.Equal(t, 1.0, got["pgdcb_runstore_appends_total/persisted"])
	require.Equal(t, 1.0, got["pgdcb_runstore_appends_total/idempotent"])
	require.Equal(t, 5.0, got["pgdcb_runstore_projector_lag_alert_threshold_seconds"])
	require.Equal(t, 0.0, got["pgdcb_runstore_projector_lag_high"])
	// CatchUp returns once the snapshot holds the event: read below the
	// horizon, or beyond it when another test's transaction holds the
	// horizon (then it is counted again once the tail reaches it).
	require.Equal(t, 1.0, max(got["pgdcb_runstore_projector_events_total"], got["pgdcb_runstore_projector_ahead_events_total"]))
}

// The lag gauge is measured when it is scraped: with no projector running,
// it grows with the age of the unprojected event. Before, the projector
// refreshed it itself, so a dead projector reported its last value (0)
// forever and PROJECTOR_LAG_HIGH never fired.
func TestLagIsMeasuredAtScrapeTime(t *testing.T) {
	t.Parallel()
	rs, m := newRunstore(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	ctx := context.Background()
	require.Zero(t, runstoreGauge(t, reg, "pgdcb_runstore_projector_lag_seconds"))

	_, err := rs.AppendEvent(ctx, conformance.Event("stale", "StepCompleted", "k1")) // nobody projects it
	require.NoError(t, err)
	var first float64
	await.Until(t, time.Minute, func() (bool, string) {
		first = runstoreGauge(t, reg, "pgdcb_runstore_projector_lag_seconds")
		return first >= 0.3, fmt.Sprintf("lag %.3f s", first)
	})
	await.Until(t, time.Minute, func() (bool, string) { // it keeps growing
		lag := runstoreGauge(t, reg, "pgdcb_runstore_projector_lag_seconds")
		return lag > first, fmt.Sprintf("lag %.3f s, first %.3f s", lag, first)
	})
	require.Zero(t, runstoreGauge(t, reg, "pgdcb_runstore_projector_lag_high"))

	require.NoError(t, rs.CatchUp(ctx))
	require.Zero(t, runstoreGauge(t, reg, "pgdcb_runstore_projector_lag_seconds"))
}
