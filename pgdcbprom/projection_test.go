package pgdcbprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// gatherReader returns each metric's value (the last series' of a labelled
// one).
func gatherReader(t *testing.T, reg *prometheus.Registry) map[string]float64 {
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

// insertPositions is a projection handler writing one rm row per event.
func insertPositions(schema string) func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
	return func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		pos := make([]int64, len(evs))
		for i, ev := range evs {
			pos[i] = ev.Position
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.rm (position) SELECT unnest($1::bigint[])`, pos)
		return err
	}
}

func rows(t testing.TB, pool *pgxpool.Pool, schema string) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+schema+`.rm`).Scan(&n))
	return n
}

// Moved from package projection's tests: the reader metrics of a running
// projection.
func TestReaderMetricsOfAProjection(t *testing.T) {
	t.Parallel()
	s, pool := teststore.New(t, nil)
	_, err := pool.Exec(context.Background(), `CREATE TABLE `+ident.Schema(s)+`.rm (position bigint NOT NULL)`)
	require.NoError(t, err)
	m := pgdcbprom.New()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	cfg := projection.Config{ReaderConfig: projection.ReaderConfig{PollInterval: 20 * time.Millisecond,
		ElectionInterval: 50 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond}}
	cfg.Tracer = m
	cfg.BatchSize = 40
	r, err := projection.New(s, "rm", query.Tagged([]string{"P"}), insertPositions(ident.Schema(s)), &cfg)
	require.NoError(t, err)
	// One transaction: a horizon held by another package's transaction can
	// not split it, so the batches are exactly 200/40.
	evs := make([]pgdcb.Event, 200)
	for i := range evs {
		evs[i] = pgdcb.MustEvent("P", nil)
	}
	_, err = s.Append(context.Background(), evs)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stop := func() { cancel(); require.ErrorIs(t, <-done, context.Canceled) }
	require.Eventually(t, func() bool { return rows(t, pool, ident.Schema(s)) == 200 }, 90*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		g := gatherReader(t, reg)
		return g["pgdcb_reader_events_delivered_total"] == 200 && g["pgdcb_reader_leader"] == 1 &&
			g["pgdcb_reader_lag_events"] == 0
	}, 90*time.Second, 5*time.Millisecond)
	g := gatherReader(t, reg)
	require.Equal(t, 5.0, g["pgdcb_reader_batches_total"])
	require.Contains(t, g, "pgdcb_reader_lag_seconds")
	require.Contains(t, g, "pgdcb_reader_horizon_held_seconds")
	stop()
	require.Equal(t, 0.0, gatherReader(t, reg)["pgdcb_reader_leader"])
}
