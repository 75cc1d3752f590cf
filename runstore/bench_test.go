package runstore_test

// Speed of the runstore against the eventstore it is built on, measured in the
// same run on the same server (compare events/s within one run):
//
//	go test ./runstore -run '^$' -bench . -benchtime 3s
//	RUNSTORE_LAG_SECONDS=20 go test ./runstore -run '^$' -bench SnapshotLag -benchtime 1x
//
// BenchmarkAppendEvent: AppendEvent on distinct runs (a new run per append,
// and one run per writer appended to repeatedly) against eventstore AppendIf
// of one event with a condition on a distinct tag (the floor of one
// conditional append). BenchmarkFetchEvents: a 1,000-event page of a
// 10,000-event run among 100,000 events, against an eventstore ReadAll of
// 1,000 events by the run's tag. BenchmarkSnapshotLag: projector lag while
// writers sustain 2,000 events/s.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/runstore/conformance"
	"github.com/pgdcb/pgdcb/tags"
)

var seq atomic.Int64

func reportRate(b *testing.B, events int64) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// runWriters runs b.N ops split over writers goroutines; op gets the writer
// index and a process-unique number.
func runWriters(b *testing.B, writers int, op func(ctx context.Context, w int, n int64) error) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range writers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(ctx, w, seq.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	reportRate(b, int64(b.N))
}

func BenchmarkAppendEvent(b *testing.B) {
	s := newStore(b, nil)
	es := s.EventStore()
	emitted := time.Now().UTC().Format(time.RFC3339Nano)
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("AppendIf/writers=%d", writers), func(b *testing.B) {
			runWriters(b, writers, func(ctx context.Context, _ int, n int64) error {
				tag := fmt.Sprintf("account=b%d", n)
				_, err := es.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, tag)},
					appendif.FailIf(query.Tagged(nil, tag), nil))
				return err
			})
		})
		b.Run(fmt.Sprintf("AppendEvent/new-run/writers=%d", writers), func(b *testing.B) {
			runWriters(b, writers, func(ctx context.Context, _ int, n int64) error {
				run := fmt.Sprintf("nr%d", n)
				// Keys are per run, as IdempotencyKey makes them: a key shared
				// by every run would serialise all appends on its lock.
				ev := conformance.Event(run, "RunStarted", runstore.IdempotencyKey(run, "", "1", "RunStarted", "v1"))
				ev.EmittedAt = emitted
				_, err := s.AppendEvent(ctx, ev)
				return err
			})
		})
		b.Run(fmt.Sprintf("AppendEvent/run-per-writer/writers=%d", writers), func(b *testing.B) {
			base := seq.Add(1)
			runWriters(b, writers, func(ctx context.Context, w int, n int64) error {
				ev := conformance.Event(fmt.Sprintf("wr%d-%d", base, w), "StepCompleted", strconv.FormatInt(n, 10))
				ev.EmittedAt = emitted
				_, err := s.AppendEvent(ctx, ev)
				return err
			})
		})
	}
}

// loadRun appends n events of runID with runSeq 1..n directly through the
// event store, in batches (benchmark setup only: the same shape AppendEvent
// writes).
func loadRun(tb testing.TB, es *eventstore.Store, runID string, n int) {
	ctx := context.Background()
	batch := make([]pgdcb.Event, 0, 1000)
	flush := func() {
		_, err := es.Append(ctx, batch)
		require.NoError(tb, err)
		batch = batch[:0]
	}
	for i := 1; i <= n; i++ {
		ev := conformance.Event(runID, "Tick", strconv.Itoa(i))
		ev.RunSeq = int64(i)
		data, err := json.Marshal(ev)
		require.NoError(tb, err)
		batch = append(batch, pgdcb.Event{
			Type:     ev.EventType,
			Tags:     tags.MustParseSet("run_id="+runID, "idempotency_key="+ev.IdempotencyKey),
			Data:     data,
			Metadata: json.RawMessage(`{"runstore":"v1"}`),
		})
		if len(batch) == cap(batch) {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

func BenchmarkFetchEvents(b *testing.B) {
	s := newStore(b, nil)
	es := s.EventStore()
	for i := range 90 {
		loadRun(b, es, fmt.Sprintf("other-%d", i), 1000)
	}
	loadRun(b, es, "big", 10_000)
	_, err := es.Pool().Exec(context.Background(), "ANALYZE "+ident.Schema(es)+".events")
	require.NoError(b, err)
	ctx := context.Background()
	b.Run("eventstore.ReadAll/1000", func(b *testing.B) {
		q := query.Tagged(nil, "run_id=big")
		for b.Loop() {
			evs, _, err := es.ReadAll(ctx, q, &pgdcb.ReadOptions{Limit: 1000})
			require.NoError(b, err)
			require.Len(b, evs, 1000)
		}
		reportRate(b, int64(b.N)*1000)
	})
	b.Run("FetchEvents/1000", func(b *testing.B) {
		i := 0
		for b.Loop() {
			after := int64(i%9) * 1000
			i++
			evs, err := s.FetchEvents(ctx, "big", &runstore.FetchOptions{AfterSeq: after, Limit: 1000})
			require.NoError(b, err)
			require.Len(b, evs, 1000)
			require.Equal(b, after+1, evs[0].RunSeq)
		}
		reportRate(b, int64(b.N)*1000)
	})
}

// BenchmarkSnapshotLag runs the projector while writers append at
// RUNSTORE_LAG_RATE events/s (default 2000) for RUNSTORE_LAG_SECONDS (default
// 5), sampling the projector lag every 100 ms. Use -benchtime 1x.
func BenchmarkSnapshotLag(b *testing.B) {
	rate := envInt("RUNSTORE_LAG_RATE", 2000)
	secs := envInt("RUNSTORE_LAG_SECONDS", 5)
	const writers = 8
	for b.Loop() {
		s := newStore(b, nil)
		ctx, cancel := context.WithCancel(context.Background())
		projDone := make(chan error, 1)
		go func() { projDone <- s.Projector().Run(ctx) }()

		var appended atomic.Int64
		start := time.Now()
		end := start.Add(time.Duration(secs) * time.Second)
		var wg sync.WaitGroup
		perWriter := time.Duration(float64(time.Second) * writers / float64(rate))
		for w := range writers {
			wg.Go(func() {
				next := start
				for i := 0; ; i++ {
					next = next.Add(perWriter)
					if next.After(end) || time.Now().After(end) {
						return // on time or not, the run ends at end
					}
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					// 10 events per run: a run starts, 8 steps, completes.
					run := fmt.Sprintf("lag-%d-%d", w, i/10)
					typ := map[int]string{0: "RunStarted", 9: "RunCompleted"}[i%10]
					if typ == "" {
						typ = "StepCompleted"
					}
					ev := conformance.Event(run, typ, strconv.Itoa(i))
					ev.StepID = fmt.Sprint(i % 10)
					if _, err := s.AppendEvent(context.Background(), ev); err != nil {
						b.Error(err)
						return
					}
					appended.Add(1)
				}
			})
		}
		var lags []time.Duration
		var oldestXact time.Duration // the horizon holder: lag cannot be below it
		tick := time.NewTicker(100 * time.Millisecond)
		for time.Now().Before(end) {
			<-tick.C
			l, err := s.SnapshotLag(context.Background())
			require.NoError(b, err)
			lags = append(lags, l.Lag)
			var ms float64
			// pg_stat_activity: the oldest transaction holding an xid in the cluster.
			require.NoError(b, s.EventStore().Pool().QueryRow(context.Background(),
				`SELECT coalesce(max(extract(epoch FROM now() - xact_start)) * 1000, 0) FROM pg_stat_activity WHERE backend_xid IS NOT NULL`).Scan(&ms))
			oldestXact = max(oldestXact, time.Duration(ms)*time.Millisecond)
		}
		tick.Stop()
		wg.Wait()
		elapsed := time.Since(start)
		require.NoError(b, s.CatchUp(context.Background()))
		cancel()
		<-projDone
		slices.Sort(lags)
		pct := func(p float64) float64 {
			if len(lags) == 0 {
				return 0
			}
			return float64(lags[int(p*float64(len(lags)-1))].Milliseconds())
		}
		b.ReportMetric(float64(appended.Load())/elapsed.Seconds(), "events/s")
		b.ReportMetric(pct(0.5), "lag-p50-ms")
		b.ReportMetric(pct(0.99), "lag-p99-ms")
		b.ReportMetric(pct(1), "lag-max-ms")
		b.ReportMetric(float64(oldestXact.Milliseconds()), "oldest-xact-max-ms")
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
