package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Result is one workload's outcome: one object of the --json output.
type Result struct {
	Name    string `json:"name"`
	Group   string `json:"group"`
	Writers int    `json:"writers"`
	// EventsPerS is the median over the repetitions of events (or rows read,
	// or refused duplicates) per second of wall time.
	EventsPerS float64 `json:"events_per_s"`
	// FloorEventsPerS is the median of the floor's repetitions, measured
	// interleaved with the workload's in the same schema; nil without floor.
	FloorEventsPerS *float64 `json:"floor_events_per_s"`
	// Ratio is EventsPerS / FloorEventsPerS.
	Ratio *float64 `json:"ratio"`
	// P50Ms and P99Ms are latency percentiles of one operation (one call;
	// for the contended workload, one committed decision including its
	// retries) over all repetitions.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// TableEvents is the number of rows in the events table when the
	// workload ended (the fixture size for reads).
	TableEvents int64 `json:"table_events"`

	Floor              string    `json:"floor,omitempty"`
	FloorWriters       int       `json:"floor_writers,omitempty"`
	FloorP50Ms         float64   `json:"floor_p50_ms,omitempty"`
	FloorP99Ms         float64   `json:"floor_p99_ms,omitempty"`
	Reps               int       `json:"reps"`
	Ops                int64     `json:"ops"`
	RepEventsPerS      []float64 `json:"rep_events_per_s"`
	FloorRepEventsPerS []float64 `json:"floor_rep_events_per_s,omitempty"`
	// Baselines are Plan.Baselines' outcomes, in order.
	Baselines []BaselineResult `json:"baselines,omitempty"`
	Notes     string           `json:"notes,omitempty"`
	Extra     map[string]any   `json:"extra,omitempty"`
	Error     string           `json:"error,omitempty"`
	// Cost and FloorCost are what the measured repetitions of the workload
	// and of its floor cost per event (CPU, WAL, transactions).
	Cost      *Cost `json:"cost,omitempty"`
	FloorCost *Cost `json:"floor_cost,omitempty"`
}

// BaselineResult is one of Result.Baselines.
type BaselineResult struct {
	Name    string `json:"name"`
	Writers int    `json:"writers"`
	// EventsPerS is the median of its repetitions, RepEventsPerS each one.
	EventsPerS    float64   `json:"events_per_s"`
	RepEventsPerS []float64 `json:"rep_events_per_s"`
	// Ratio is the workload's EventsPerS over this one's.
	Ratio *float64 `json:"ratio"`
	P50Ms float64  `json:"p50_ms"`
	P99Ms float64  `json:"p99_ms"`
}

// runAll runs the workloads in order. A workload that fails is reported with
// its error and the run goes on; only cancellation stops it.
func runAll(ctx context.Context, pool *pgxpool.Pool, o *options, ws []Workload, log io.Writer) ([]*Result, error) {
	var (
		results []*Result
		shared  *Env // the current read fixture, reused by workloads of the same size
	)
	dropShared := func() {
		if shared != nil {
			if err := shared.drop(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(log, "bench: dropping %s: %v\n", shared.Schema, err)
			}
			shared = nil
		}
	}
	defer dropShared()
	m := newMeter(ctx, pool)
	for _, w := range ws {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		var env *Env
		if w.Fixture > 0 && shared != nil && shared.Fixture == w.Fixture {
			env = shared
		} else {
			dropShared()
			t0 := time.Now()
			var err error
			env, err = newEnv(ctx, pool, w.Fixture)
			if err != nil {
				results = append(results, &Result{Name: w.Name, Group: w.Group, Writers: w.Writers, Error: err.Error()})
				fmt.Fprintf(log, "bench: %-32s FAILED: %v\n", w.Name, err)
				continue
			}
			if w.Fixture > 0 {
				shared = env
				fmt.Fprintf(log, "bench: built a %s-event table in %s\n", sizeName(w.Fixture), time.Since(t0).Round(100*time.Millisecond))
			}
		}
		env.GroupSenders = o.groupSenders
		env.meter = m
		t0 := time.Now()
		r, err := runOne(ctx, env, o, w)
		if w.Fixture == 0 {
			if derr := env.drop(context.WithoutCancel(ctx)); derr != nil {
				fmt.Fprintf(log, "bench: dropping %s: %v\n", env.Schema, derr)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return results, ctx.Err()
			}
			r.Error = err.Error()
			fmt.Fprintf(log, "bench: %-32s FAILED: %v\n", w.Name, err)
		} else {
			fmt.Fprintf(log, "bench: %-32s %10.0f ev/s  floor %s  (%s)\n", w.Name, r.EventsPerS, fmtFloat(r.FloorEventsPerS, "%.0f"), time.Since(t0).Round(100*time.Millisecond))
			if r.Cost != nil {
				fmt.Fprintf(log, "bench:   per event: %s; floor: %s\n", r.Cost, r.FloorCost)
			}
		}
		results = append(results, r)
	}
	return results, nil
}

// runOne warms up, then runs o.reps repetitions of the workload, each
// followed by one of its floor (interleaved, so drift on a shared machine
// hits both alike), and checks the counters.
func runOne(ctx context.Context, env *Env, o *options, w Workload) (*Result, error) {
	r := &Result{Name: w.Name, Group: w.Group, Writers: w.Writers, Reps: o.reps}
	plan, err := w.Prepare(ctx, env)
	if err != nil {
		return r, fmt.Errorf("prepare: %w", err)
	}
	op := newRunner(plan.Op, w.Writers)
	var floor *runner
	if plan.Floor != nil {
		fw := plan.FloorWriters
		if fw == 0 {
			fw = w.Writers
		}
		floor = newRunner(plan.Floor, fw)
		r.Floor, r.FloorWriters = plan.FloorName, fw
	}

	baselines := make([]*runner, len(plan.Baselines))
	r.Baselines = make([]BaselineResult, len(plan.Baselines))
	for i, b := range plan.Baselines {
		bw := b.Writers
		if bw == 0 {
			bw = w.Writers
		}
		baselines[i] = newRunner(b.Op, bw)
		r.Baselines[i] = BaselineResult{Name: b.Name, Writers: bw}
	}

	if _, err := op.run(ctx, o.warmup); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}
	if floor != nil {
		if _, err := floor.run(ctx, o.warmup); err != nil {
			return r, fmt.Errorf("floor warm-up: %w", err)
		}
	}
	for i, b := range baselines {
		if _, err := b.run(ctx, o.warmup); err != nil {
			return r, fmt.Errorf("%s warm-up: %w", plan.Baselines[i].Name, err)
		}
	}
	if plan.Start != nil {
		plan.Start()
	}
	baseLats := make([][]time.Duration, len(baselines))

	var (
		total             Counters
		lats, floorLats   []time.Duration
		rates, floorRates []float64
		elapsedTotal      float64
		cost, floorCost   costSum
	)
	// measured runs run under the meter: a reading before and after, added
	// to sum (a failed reading leaves the cost out, not the run).
	m := env.meter
	if plan.Meter != nil {
		m = plan.Meter
	}
	measured := func(r *runner, sum *costSum) (*sample, error) {
		before, berr := m.read(ctx)
		s, err := r.run(ctx, o.duration)
		if err != nil {
			return nil, err
		}
		if after, aerr := m.read(ctx); berr == nil && aerr == nil {
			sum.add(before, after, s.events)
		}
		return s, nil
	}
	for range o.reps {
		s, err := measured(op, &cost)
		if err != nil {
			return r, err
		}
		total.add(&s.counters)
		lats = append(lats, s.latencies...)
		rates = append(rates, s.perSecond())
		elapsedTotal += s.elapsed.Seconds()
		r.Ops += s.ops
		if floor != nil {
			fs, err := measured(floor, &floorCost)
			if err != nil {
				return r, fmt.Errorf("floor: %w", err)
			}
			floorLats = append(floorLats, fs.latencies...)
			floorRates = append(floorRates, fs.perSecond())
		}
		for i, b := range baselines {
			bs, err := b.run(ctx, o.duration)
			if err != nil {
				return r, fmt.Errorf("%s: %w", plan.Baselines[i].Name, err)
			}
			baseLats[i] = append(baseLats[i], bs.latencies...)
			r.Baselines[i].RepEventsPerS = append(r.Baselines[i].RepEventsPerS, bs.perSecond())
		}
	}
	r.RepEventsPerS = rates
	r.Cost, r.FloorCost = cost.cost(), floorCost.cost()
	r.EventsPerS = median(rates)
	r.P50Ms, r.P99Ms = percentileMs(lats, 50), percentileMs(lats, 99)
	if floor != nil {
		f := median(floorRates)
		r.FloorEventsPerS, r.FloorRepEventsPerS = &f, floorRates
		r.FloorP50Ms, r.FloorP99Ms = percentileMs(floorLats, 50), percentileMs(floorLats, 99)
		if f > 0 {
			ratio := r.EventsPerS / f
			r.Ratio = &ratio
		}
	}
	for i := range r.Baselines {
		b := &r.Baselines[i]
		b.EventsPerS = median(b.RepEventsPerS)
		b.P50Ms, b.P99Ms = percentileMs(baseLats[i], 50), percentileMs(baseLats[i], 99)
		if b.EventsPerS > 0 {
			ratio := r.EventsPerS / b.EventsPerS
			b.Ratio = &ratio
		}
	}
	if plan.Notes != nil {
		r.Notes = plan.Notes(&total, elapsedTotal)
	}
	if plan.Extra != nil {
		r.Extra = plan.Extra(&total, elapsedTotal)
	}
	// Table size at the end: a count is cheap next to a workload, and exact.
	if env.Fixture > 0 {
		r.TableEvents = int64(env.Fixture)
	} else if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM `+env.Q+`.events`).Scan(&r.TableEvents); err != nil {
		return r, err
	}
	if plan.Check != nil {
		if err := plan.Check(ctx, &total); err != nil {
			return r, err
		}
	}
	return r, nil
}

func fmtFloat(p *float64, format string) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf(format, *p)
}
