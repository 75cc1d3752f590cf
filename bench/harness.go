package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Counters are what an operation reports besides its event count. Safe for
// concurrent use.
type Counters struct {
	Successes  atomic.Int64 // appends that committed
	Conflicts  atomic.Int64 // ErrConditionFailed seen
	Retries    atomic.Int64 // decisions re-run after a conflict
	Idempotent atomic.Int64 // ErrIdempotent seen
}

func (c *Counters) add(o *Counters) {
	c.Successes.Add(o.Successes.Load())
	c.Conflicts.Add(o.Conflicts.Load())
	c.Retries.Add(o.Retries.Load())
	c.Idempotent.Add(o.Idempotent.Load())
}

// sample is one timed run of an operation.
type sample struct {
	events    int64
	ops       int64
	elapsed   time.Duration
	latencies []time.Duration
	counters  Counters
}

func (s *sample) perSecond() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.events) / s.elapsed.Seconds()
}

// runner runs an OpFunc with per-writer sequence numbers that keep counting
// across warm-up and repetitions.
type runner struct {
	op  OpFunc
	seq []int64
}

func newRunner(op OpFunc, writers int) *runner {
	return &runner{op: op, seq: make([]int64, writers)}
}

// run starts len(r.seq) writers, each calling the operation until d has
// passed, and measures events per second over the wall time until the last
// writer stopped. The first error cancels the others and is returned.
func (r *runner) run(ctx context.Context, d time.Duration) (*sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	writers := len(r.seq)
	s := &sample{}
	lats := make([][]time.Duration, writers)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		events   atomic.Int64
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				n, err := r.op(ctx, w, r.seq[w], &s.counters)
				lat := time.Since(t0)
				r.seq[w]++
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("writer %d, call %d: %w", w, r.seq[w]-1, err); cancel() })
					return
				}
				events.Add(int64(n))
				lats[w] = append(lats[w], lat)
			}
		}(w)
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.events = events.Load()
	for _, l := range lats {
		s.latencies = append(s.latencies, l...)
	}
	s.ops = int64(len(s.latencies))
	return s, nil
}

// median of xs (xs is not modified).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

// percentile p (0..100) of ds by the nearest-rank method, in milliseconds.
func percentileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), ds...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	rank := int(math.Ceil(p / 100 * float64(len(c))))
	if rank < 1 {
		rank = 1
	}
	return float64(c[rank-1]) / float64(time.Millisecond)
}
