package projection_test

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// BacklogEnv sets the backlog size of the catch-up benchmark (default 1M).
const BacklogEnv = "PGDCB_BENCH_BACKLOG"

// BenchmarkProjectionCatchUp: events/s from a backlog into a projection that
// writes one row per event, against the floor of one INSERT … SELECT copying
// the same rows in the same run.
//
//	go test -run '^$' -bench ProjectionCatchUp -benchtime 1x ./projection
func BenchmarkProjectionCatchUp(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv(BacklogEnv)); err == nil && v > 0 {
		n = v
	}
	s, pool := newStore(b)
	ctx := context.Background()
	for from := 0; from < n; from += 100_000 {
		_, err := pool.Exec(ctx, `INSERT INTO `+ident.Schema(s)+`.events (type, tags, data)
			SELECT 'P', ARRAY['item=' || (g % 1000)], jsonb_build_object('n', g) FROM generate_series($1::int, $2::int) g`,
			from, min(n, from+100_000)-1)
		require.NoError(b, err)
	}
	_, err := pool.Exec(ctx, `ANALYZE `+ident.Schema(s)+`.events`)
	require.NoError(b, err)
	truncate := func() {
		_, err := pool.Exec(ctx, `TRUNCATE `+ident.Schema(s)+`.rm`)
		require.NoError(b, err)
	}

	var floor, proj time.Duration
	for i := range b.N {
		truncate()
		start := time.Now()
		_, err := pool.Exec(ctx, `INSERT INTO `+ident.Schema(s)+`.rm SELECT position, type FROM `+ident.Schema(s)+`.events`)
		require.NoError(b, err)
		floor += time.Since(start)
		truncate()

		var handled atomic.Int64
		ins := insertRows(ident.Schema(s))
		h := func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
			if err := ins(ctx, tx, evs); err != nil {
				return err
			}
			handled.Add(int64(len(evs)))
			return nil
		}
		r, err := projection.New(s, "bench"+strconv.Itoa(i), query.Tagged([]string{"P"}), h,
			&projection.Config{BatchSize: 1000, ReaderConfig: projection.ReaderConfig{PollInterval: 10 * time.Millisecond}})
		require.NoError(b, err)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start = time.Now()
		go func() { done <- r.Run(cctx) }()
		for handled.Load() < int64(n) || rmCount(b, pool, s) < n { // rows handled, then committed
			time.Sleep(2 * time.Millisecond)
		}
		proj += time.Since(start)
		cancel()
		require.ErrorIs(b, <-done, context.Canceled)
	}
	total := float64(n * b.N)
	b.ReportMetric(total/proj.Seconds(), "events/s")
	b.ReportMetric(total/floor.Seconds(), "floor-events/s")
	b.ReportMetric(floor.Seconds()/proj.Seconds(), "x-floor")
}
