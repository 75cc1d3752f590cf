package subscription_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// BacklogEnv sets the backlog size of the catch-up benchmarks (default 1M).
const BacklogEnv = "PGDCB_BENCH_BACKLOG"

func backlogSize() int {
	if n, err := strconv.Atoi(os.Getenv(BacklogEnv)); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// loadBacklog fills the events table with n events by INSERT … SELECT
// generate_series, in transactions of 100k, and analyses it.
func loadBacklog(b *testing.B, s *eventstore.Store, n int) {
	ctx := context.Background()
	for from := 0; from < n; from += 100_000 {
		to := min(n, from+100_000) - 1
		_, err := s.Pool().Exec(ctx, `INSERT INTO `+ident.Schema(s)+`.events (type, tags, data)
			SELECT 'Added', ARRAY['item=' || (g % 1000)], jsonb_build_object('n', g) FROM generate_series($1::int, $2::int) g`, from, to)
		require.NoError(b, err)
	}
	_, err := s.Pool().Exec(ctx, `ANALYZE `+ident.Schema(s)+`.events`)
	require.NoError(b, err)
}

// BenchmarkCatchUp: events/s delivered from a backlog to a no-op handler, and
// the same read done as a bare ReadTail loop (the floor) in the same run.
//
//	go test -run '^$' -bench CatchUp -benchtime 1x ./subscription
func BenchmarkCatchUp(b *testing.B) {
	n := backlogSize()
	s, _ := newStore(b, "")
	loadBacklog(b, s, n)
	q := query.All()
	const batch = 1000
	ctx := context.Background()

	var floor, sub time.Duration
	for range b.N {
		start := time.Now()
		cur, got := cursor.Cursor{}, 0
		for got < n {
			tb, err := s.ReadTail(ctx, q, cur, batch)
			require.NoError(b, err)
			got += len(tb.Events)
			cur = tb.Cursor
		}
		floor += time.Since(start)

		sb, err := subscription.New(s, q, &subscription.Config{BatchSize: batch})
		require.NoError(b, err)
		cctx, cancel := context.WithCancel(ctx)
		got = 0
		start = time.Now()
		err = sb.Run(cctx, cursor.Cursor{}, func(_ context.Context, bt subscription.Batch) error {
			got += len(bt.Events)
			if got >= n {
				cancel()
			}
			return nil
		})
		sub += time.Since(start)
		require.ErrorIs(b, err, context.Canceled)
		cancel()
	}
	total := float64(n * b.N)
	b.ReportMetric(total/sub.Seconds(), "events/s")
	b.ReportMetric(total/floor.Seconds(), "floor-events/s")
	b.ReportMetric(floor.Seconds()/sub.Seconds(), "x-floor")
}

// BenchmarkLiveLatency: append → handler latency, one event at a time, with
// NOTIFY (poll 1s as a fallback) and with polling only every 50ms.
//
//	go test -run '^$' -bench LiveLatency -benchtime 500x ./subscription
func BenchmarkLiveLatency(b *testing.B) {
	for _, mode := range []struct {
		name   string
		notify bool
		poll   time.Duration
	}{{"notify", true, time.Second}, {"poll-50ms", false, 50 * time.Millisecond}} {
		b.Run(mode.name, func(b *testing.B) {
			s, _ := newStore(b, "")
			sb, err := subscription.New(s, query.All(), &subscription.Config{PollInterval: mode.poll, NotifyDisabled: !mode.notify})
			require.NoError(b, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			lat := make(chan time.Duration, 1)
			var ready atomic.Bool
			go func() {
				_ = sb.Run(ctx, cursor.Cursor{}, func(_ context.Context, bt subscription.Batch) error {
					now := time.Now()
					for _, ev := range bt.Events {
						var d struct{ T int64 }
						if json.Unmarshal(ev.Data, &d) == nil && d.T > 0 {
							lat <- now.Sub(time.Unix(0, d.T))
						} else {
							ready.Store(true)
						}
					}
					return nil
				})
			}()
			// A first event, delivered once the subscription is listening.
			_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Warm", map[string]int{}, "k=v")})
			require.NoError(b, err)
			for !ready.Load() {
				time.Sleep(time.Millisecond)
			}
			lats := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				ev := pgdcb.MustEvent("Ping", map[string]int64{"t": time.Now().UnixNano()}, "k=v")
				_, err := s.Append(ctx, []pgdcb.Event{ev})
				require.NoError(b, err)
				lats = append(lats, <-lat)
			}
			b.StopTimer()
			slices.Sort(lats)
			b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
