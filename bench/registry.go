package main

import (
	"context"
	"regexp"
)

// Workload is one measured thing. Every workload runs in a schema of its own
// (see Env), except that read workloads sharing a Fixture size share one
// read-only table built for them.
type Workload struct {
	// Name identifies the workload in every output, e.g. "append/1ev".
	Name string
	// Group is the family shown in the chart and tables: "append",
	// "appendif", "contended", "idempotent", "read", ….
	Group string
	// Writers is the number of concurrent goroutines (each with its own
	// connection from the pool) running the operation.
	Writers int
	// Fixture, when > 0, is the number of events the table holds before the
	// workload starts (built fast with generate_series, then VACUUM ANALYZE).
	// Workloads with the same Fixture run in the same schema, one after the
	// other; they must not write to it.
	Fixture int
	// Quick says the workload runs under --quick.
	Quick bool
	// Large says the workload runs only under --large.
	Large bool
	// Prepare runs once in the workload's schema before warm-up and returns
	// what to measure.
	Prepare func(ctx context.Context, env *Env) (*Plan, error)
}

// Plan is what Prepare returns: the operation, its floor and its checks.
type Plan struct {
	// Op is one operation by writer w (0-based); seq counts that writer's
	// calls from 0 across warm-up and repetitions (unique per writer). It
	// returns how many events (or rows read) it handled. An error stops the
	// run: self-checks inside Op (an unexpected conflict, a wrong count)
	// return errors.
	Op OpFunc
	// Floor is the baseline measured in the same schema, interleaved with
	// Op's repetitions; nil when there is none.
	Floor OpFunc
	// FloorName says what Floor is, in the tables.
	FloorName string
	// FloorWriters is the concurrency of Floor; 0 means Writers.
	FloorWriters int
	// Baselines are further operations measured like Floor: warmed up, then
	// one repetition of each after the floor's in every round (interleaved
	// with Op's). The result reports each one's rate and latencies and Op's
	// ratio to it: variants compared in the same run (grouping on against
	// off, a grouped-INSERT ceiling).
	Baselines []Baseline
	// Start, when set, runs once after the warm-ups, just before the first
	// measured repetition (to snapshot counters such as GroupStats).
	Start func()
	// Check runs after all repetitions with the counters summed over them
	// (warm-up excluded); a non-nil error fails the workload loudly.
	Check func(ctx context.Context, c *Counters) error
	// Notes, when set, returns extra text for the table (rates, …).
	Notes func(c *Counters, elapsedSeconds float64) string
	// Extra, when set, returns extra JSON fields.
	Extra func(c *Counters, elapsedSeconds float64) map[string]any
	// Meter, when set, takes the cost readings instead of the bench's own
	// meter: for a workload whose events go to another server (the logical
	// rows' throwaway cluster), so that the server, WAL and xact columns
	// are that server's.
	Meter *meter
}

// Baseline is one of Plan.Baselines.
type Baseline struct {
	// Name says what it is, in the tables.
	Name string
	// Op is the operation, called like Plan.Op.
	Op OpFunc
	// Writers is its concurrency; 0 means the workload's Writers.
	Writers int
}

// OpFunc is one operation; see Plan.Op.
type OpFunc func(ctx context.Context, w int, seq int64, c *Counters) (n int, err error)

// registry holds every workload in run order.
var registry []Workload

func register(ws ...Workload) { registry = append(registry, ws...) }

// The built-in workloads: writes first (each in an empty schema), then reads
// by growing table size. This init runs before those of files named
// workloads_*.go (Go runs a package's init functions in file name order), so
// plug-ins come after the built-ins.
func init() {
	register(writeWorkloads()...)
	register(readWorkloads()...)
}

// ---------------------------------------------------------------------------
// PLUG-IN POINT for workloads of other packages.
//
// Write a file bench/workloads_<pkg>.go with
//
//	func init() { register(Workload{Name: "<pkg>/…", Group: "<pkg>", ...}) }
//
// Prepare gets an Env with a migrated schema and a Store (env.Store, env.Pool,
// env.Schema); Op returns the number of events handled; a Floor is optional.
// The runner, the repetitions, the median, the outputs and the self-check
// plumbing need no change. Plan has no close hook: a workload that starts
// goroutines stops them in Check and when its Op or Floor fails.
//
// Plugged in so far: workloads_subscription.go (catch-up, placed after the
// read workloads of its fixture size to reuse their table; live latency) and
// workloads_runstore.go (AppendEvent, FetchEvents). See docs/BENCHMARKS.md.
// ---------------------------------------------------------------------------

// selectWorkloads returns the workloads to run for the options.
func selectWorkloads(o *options) ([]Workload, error) {
	var re *regexp.Regexp
	if o.only != "" {
		var err error
		if re, err = regexp.Compile(o.only); err != nil {
			return nil, err
		}
	}
	var out []Workload
	for _, w := range registry {
		if w.Large && !o.large {
			continue
		}
		if o.quick && !w.Quick {
			continue
		}
		if re != nil && !re.MatchString(w.Name) {
			continue
		}
		out = append(out, w)
	}
	return out, nil
}
