package pgdcbprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/subscription"
)

// holderSeries returns the label sets of pgdcb_reader_horizon_holder.
func holderSeries(t *testing.T, reg *prometheus.Registry) []map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var out []map[string]string
	for _, mf := range mfs {
		if mf.GetName() != "pgdcb_reader_horizon_holder" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out = append(out, l)
		}
	}
	return out
}

// The holder metric names the backend holding the horizon while it is held,
// follows a new holder, and disappears when the horizon is free.
func TestHorizonHolderMetric(t *testing.T) {
	t.Parallel()
	m := pgdcbprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	m.TraceLag(context.Background(), "r", subscription.Lag{HorizonHeld: time.Second, HorizonHolder: pgdcb.HorizonHolder{PID: 42, Database: "app"}})
	require.Equal(t, []map[string]string{{"name": "r", "pid": "42", "database": "app"}}, holderSeries(t, reg))
	m.TraceLag(context.Background(), "r", subscription.Lag{HorizonHeld: time.Second, HorizonHolder: pgdcb.HorizonHolder{PID: 7, Database: "app"}})
	require.Equal(t, []map[string]string{{"name": "r", "pid": "7", "database": "app"}}, holderSeries(t, reg))
	m.TraceLag(context.Background(), "r", subscription.Lag{})
	require.Empty(t, holderSeries(t, reg))
}
