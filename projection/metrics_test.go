package projection_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			}
			out[mf.GetName()] = v
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	m := pgdcbprom.NewReaderMetrics()
	reg := prometheus.NewRegistry()
	for _, c := range m.Collectors() {
		require.NoError(t, reg.Register(c))
	}
	cfg := *fast
	cfg.Tracer = m
	cfg.BatchSize = 40
	r, err := projection.New(s, "rm", query.Tagged([]string{"P"}), insertRows(ident.Schema(s)), &cfg)
	require.NoError(t, err)
	// One transaction: a horizon held by another package's transaction can
	// not split it, so the batches are exactly 200/40.
	appendN(t, s, "P", 200, 200)
	stop := start(t, r)
	require.Eventually(t, func() bool { return rmCount(t, pool, s) == 200 }, wait, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		g := gather(t, reg)
		return g["pgdcb_reader_events_delivered_total"] == 200 && g["pgdcb_reader_leader"] == 1 &&
			g["pgdcb_reader_lag_events"] == 0
	}, wait, 5*time.Millisecond)
	g := gather(t, reg)
	require.Equal(t, 5.0, g["pgdcb_reader_batches_total"])
	require.Contains(t, g, "pgdcb_reader_lag_seconds")
	require.Contains(t, g, "pgdcb_reader_horizon_held_seconds")
	stop()
	require.Equal(t, 0.0, gather(t, reg)["pgdcb_reader_leader"])
}
