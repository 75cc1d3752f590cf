package effects_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/effects"
)

// BenchmarkEffects measures effects executed per second (claim, a handler
// that does nothing, completion) with 1 and 8 workers over 64 sessions; the
// requests are made before the timer starts. BenchmarkEffects/append-one is
// the baseline: a plain Append of one event, in the same run.
//
//	go test -run '^$' -bench Effects -benchtime 2000x ./effects/
func BenchmarkEffects(b *testing.B) {
	b.Run("append-one", func(b *testing.B) {
		s := newStore(b)
		ctx := context.Background()
		ev := pgdcb.MustEvent("Baseline", map[string]int{"n": 1}, "effect_session=s")
		b.ResetTimer()
		for range b.N {
			if _, err := s.Append(ctx, []pgdcb.Event{ev}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	})
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s := newStore(b)
			q := newQueue(b, s)
			ctx := context.Background()
			for i := range b.N {
				_, _, err := q.Request(ctx, effects.Request{Type: "noop", Session: fmt.Sprintf("s%d", i%64), DedupeKey: fmt.Sprint(i)})
				require.NoError(b, err)
			}
			var ws []*effects.Worker
			for range workers {
				w, err := effects.NewWorker(s, &effects.Config{PollInterval: 50 * time.Millisecond,
					Handlers: map[string]effects.Handler{"noop": func(context.Context, effects.Effect) error { return nil }}})
				require.NoError(b, err)
				ws = append(ws, w)
			}
			b.ResetTimer()
			stop := startWorkers(b, ws...)
			for {
				var total effects.Stats
				for _, w := range ws {
					total = total.Add(w.Stats())
				}
				if total.Executed >= int64(b.N) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			stop()
			var total effects.Stats
			for _, w := range ws {
				total = total.Add(w.Stats())
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "effects/s")
			b.ReportMetric(float64(total.ClaimConflicts)/float64(b.N), "conflicts/effect")
		})
	}
}
