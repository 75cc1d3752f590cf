package runstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
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

// The lag gauge is measured when it is scraped: with no projector running,
// it grows with the age of the unprojected event. Before, the projector
// refreshed it itself, so a dead projector reported its last value (0)
// forever and PROJECTOR_LAG_HIGH never fired.
func TestLagIsMeasuredAtScrapeTime(t *testing.T) {
	t.Parallel()
	rs := newStore(t, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors(rs)...)
	ctx := context.Background()
	require.Zero(t, gauge(t, reg, "pgdcb_runstore_projector_lag_seconds"))

	_, err := rs.AppendEvent(ctx, runEvent("stale", "k1")) // nobody projects it
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	first := gauge(t, reg, "pgdcb_runstore_projector_lag_seconds")
	require.GreaterOrEqual(t, first, 0.3)
	time.Sleep(200 * time.Millisecond)
	require.Greater(t, gauge(t, reg, "pgdcb_runstore_projector_lag_seconds"), first, "it keeps growing")
	require.Zero(t, gauge(t, reg, "pgdcb_runstore_projector_lag_high"))

	require.NoError(t, rs.CatchUp(ctx))
	require.Zero(t, gauge(t, reg, "pgdcb_runstore_projector_lag_seconds"))
}
