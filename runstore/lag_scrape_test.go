package runstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgdcb/pgdcb/internal/testing/await"
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
	var first float64
	await.Until(t, time.Minute, func() (bool, string) {
		first = gauge(t, reg, "pgdcb_runstore_projector_lag_seconds")
		return first >= 0.3, fmt.Sprintf("lag %gs", first)
	})
	await.Until(t, time.Minute, func() (bool, string) {
		g := gauge(t, reg, "pgdcb_runstore_projector_lag_seconds")
		return g > first, fmt.Sprintf("lag %gs, not above %gs: it keeps growing", g, first)
	})
	require.Zero(t, gauge(t, reg, "pgdcb_runstore_projector_lag_high"))

	require.NoError(t, rs.CatchUp(ctx))
	require.Zero(t, gauge(t, reg, "pgdcb_runstore_projector_lag_seconds"))
}
