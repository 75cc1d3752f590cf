package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// target is one statement measured inside a workload: a variant's, or the
// floor's.
type target struct {
	label  string
	events int // events written or read per call, for the rate
	op     func(ctx context.Context) error
	// setup runs before each warm-up, repetition and plan capture of this
	// target, reset after (session settings of this target only).
	setup, reset []string
}

// around runs fn between t's setup and reset statements.
func (b *bench) around(ctx context.Context, t target, fn func() error) error {
	for _, s := range t.setup {
		if _, err := b.conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%q: %w", s, err)
		}
	}
	err := fn()
	for _, s := range t.reset {
		if _, rerr := b.conn.Exec(context.WithoutCancel(ctx), s); rerr != nil && err == nil {
			err = fmt.Errorf("%q: %w", s, rerr)
		}
	}
	return err
}

// workload is a set of targets measured interleaved: warm-up of each, then
// reps × (one repetition of each target, in order), so drift on a shared
// machine hits all alike.
type workload struct {
	name    string
	what    string
	write   bool
	explain bool // capture the plan of each target after the measurement
	setup   []string
	reset   []string
	targets []target
}

// measured is one target's result.
type measured struct {
	Label   string
	Events  int
	Rates   []float64 // calls per second, one per repetition
	Calls   int
	P50     time.Duration
	P99     time.Duration
	Plan    string
	planErr error
}

// Median calls per second.
func (m measured) Median() float64 {
	r := slices.Clone(m.Rates)
	slices.Sort(r)
	return r[len(r)/2]
}

// MicrosPerCall is the median repetition's mean time per call.
func (m measured) MicrosPerCall() float64 { return 1e6 / m.Median() }

type workloadResult struct {
	Name     string
	What     string
	Write    bool
	Targets  []measured
	Busy     int     // most other active client backends seen at a repetition's start
	LoadAvg1 float64 // 1-minute load average at the end
}

func (w workloadResult) target(label string) (measured, bool) {
	for _, t := range w.Targets {
		if t.Label == label {
			return t, true
		}
	}
	return measured{}, false
}

// bench runs workloads on the measuring connection conn (one client) and
// samples the server's other activity on mon.
type bench struct {
	conn, mon *pgx.Conn
	o         *options
	logf      func(string, ...any)

	// auto_explain captures the plan the measuring session really ran
	// (custom or generic) as a NOTICE.
	explainOK  bool
	explainErr error
	mu         sync.Mutex
	notices    []string
	capturing  bool
}

func (b *bench) onNotice(_ *pgconn.PgConn, n *pgconn.Notice) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.capturing {
		b.notices = append(b.notices, n.Message)
	}
}

// enableExplain loads auto_explain into the measuring session, inactive
// (log_min_duration -1) until a capture.
func (b *bench) enableExplain(ctx context.Context) {
	for _, s := range []string{
		`LOAD 'auto_explain'`,
		`SET auto_explain.log_min_duration = -1`,
		`SET auto_explain.log_analyze = on`,
		`SET auto_explain.log_buffers = on`,
		`SET auto_explain.log_timing = on`,
		`SET auto_explain.log_nested_statements = off`,
		`SET auto_explain.log_level = notice`,
	} {
		if _, err := b.conn.Exec(ctx, s); err != nil {
			b.explainErr = fmt.Errorf("%s: %w", s, err)
			return
		}
	}
	b.explainOK = true
}

// capturePlan runs op once with auto_explain on and returns what it logged.
func (b *bench) capturePlan(ctx context.Context, op func(context.Context) error) (string, error) {
	if !b.explainOK {
		return "", b.explainErr
	}
	if _, err := b.conn.Exec(ctx, `SET auto_explain.log_min_duration = 0`); err != nil {
		return "", fmt.Errorf("enabling auto_explain: %w", err)
	}
	b.mu.Lock()
	b.capturing, b.notices = true, nil
	b.mu.Unlock()
	opErr := op(ctx)
	b.mu.Lock()
	b.capturing = false
	notes := b.notices
	b.mu.Unlock()
	if _, err := b.conn.Exec(ctx, `SET auto_explain.log_min_duration = -1`); err != nil {
		return "", fmt.Errorf("disabling auto_explain: %w", err)
	}
	if opErr != nil {
		return "", fmt.Errorf("explained call: %w", opErr)
	}
	return strings.TrimSpace(strings.Join(notes, "\n")), nil
}

func (b *bench) otherActive(ctx context.Context) int {
	var n int
	// Best effort: the sample only annotates the report.
	_ = b.mon.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE state = 'active' AND backend_type = 'client backend'
		  AND pid <> pg_backend_pid() AND pid <> $1`, b.conn.PgConn().PID()).Scan(&n)
	return n
}

func loadAvg1() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscan(string(raw), &l); err != nil {
		return -1
	}
	return l
}

// runFor calls op until d has passed; returns calls and each call's latency.
func runFor(ctx context.Context, d time.Duration, op func(context.Context) error) (int, time.Duration, []time.Duration, error) {
	var lats []time.Duration
	start := time.Now()
	deadline := start.Add(d)
	for {
		t := time.Now()
		if !t.Before(deadline) {
			break
		}
		if err := ctx.Err(); err != nil {
			return 0, 0, nil, err
		}
		if err := op(ctx); err != nil {
			return 0, 0, nil, err
		}
		lats = append(lats, time.Since(t))
	}
	return len(lats), time.Since(start), lats, nil
}

func (b *bench) run(ctx context.Context, w workload) (workloadResult, error) {
	res := workloadResult{Name: w.name, What: w.what, Write: w.write}
	for _, s := range w.setup {
		if _, err := b.conn.Exec(ctx, s); err != nil {
			return res, fmt.Errorf("%s: setup %q: %w", w.name, s, err)
		}
	}
	defer func() {
		for _, s := range w.reset {
			// The connection is unusable after a failure anyway.
			_, _ = b.conn.Exec(context.WithoutCancel(ctx), s)
		}
	}()
	for _, t := range w.targets {
		if err := b.around(ctx, t, func() error {
			_, _, _, err := runFor(ctx, b.o.warmup, t.op)
			return err
		}); err != nil {
			return res, fmt.Errorf("%s/%s: warm-up: %w", w.name, t.label, err)
		}
	}
	out := make([]measured, len(w.targets))
	lats := make([][]time.Duration, len(w.targets))
	for i, t := range w.targets {
		out[i] = measured{Label: t.label, Events: t.events}
	}
	for rep := 0; rep < b.o.reps; rep++ {
		for i, t := range w.targets {
			res.Busy = max(res.Busy, b.otherActive(ctx))
			var (
				calls int
				el    time.Duration
				l     []time.Duration
			)
			err := b.around(ctx, t, func() (err error) {
				calls, el, l, err = runFor(ctx, b.o.duration, t.op)
				return err
			})
			if err != nil {
				return res, fmt.Errorf("%s/%s: repetition %d: %w", w.name, t.label, rep+1, err)
			}
			out[i].Rates = append(out[i].Rates, float64(calls)/el.Seconds())
			out[i].Calls += calls
			lats[i] = append(lats[i], l...)
		}
	}
	for i, t := range w.targets {
		slices.Sort(lats[i])
		out[i].P50 = percentile(lats[i], 0.50)
		out[i].P99 = percentile(lats[i], 0.99)
		if w.explain {
			out[i].planErr = b.around(ctx, t, func() (err error) {
				out[i].Plan, err = b.capturePlan(ctx, t.op)
				return err
			})
			if out[i].planErr != nil && b.explainOK {
				return res, fmt.Errorf("%s/%s: plan: %w", w.name, t.label, out[i].planErr)
			}
		}
		b.logf("  %-28s %-26s %9.1f µs/call  p50 %7.1f µs  p99 %8.1f µs  (%d calls)",
			w.name, t.label, out[i].MicrosPerCall(), micros(out[i].P50), micros(out[i].P99), out[i].Calls)
	}
	res.Targets = out
	res.LoadAvg1 = loadAvg1()
	return res, nil
}

// percentile by nearest rank of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
