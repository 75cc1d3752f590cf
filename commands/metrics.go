package commands

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	executed   *prometheus.CounterVec
	failed     *prometheus.CounterVec
	retried    *prometheus.CounterVec
	idempotent *prometheus.CounterVec
	attempts   *prometheus.HistogramVec
	duration   *prometheus.HistogramVec
}

// newMetrics returns the executor's collectors, named pgdcb_commands_…
// (docs/METRICS.md).
func newMetrics() *metrics {
	const ns = "pgdcb"
	return &metrics{
		executed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "commands", Name: "executed_total",
			Help: "Commands that committed (a new outcome), by type.",
		}, []string{"type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "commands", Name: "failed_total",
			Help: "Commands that did not commit, by type and reason (rejected, conflict, error).",
		}, []string{"type", "reason"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "commands", Name: "retried_total",
			Help: "Decisions made again after an append condition failed, by type.",
		}, []string{"type"}),
		idempotent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "commands", Name: "idempotent_total",
			Help: "Commands whose id had already been executed (first outcome returned), by type.",
		}, []string{"type"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: "commands", Name: "attempts",
			Help:    "Decisions made per command, by type.",
			Buckets: []float64{1, 2, 3, 5, 8, 13, 21},
		}, []string{"type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: "commands", Name: "duration_seconds",
			Help:    "Time to execute a command, retries included, by type.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"type"}),
	}
}

// Collectors returns the executor's Prometheus collectors, for the caller to
// register (nothing is registered globally).
func (e *Executor) Collectors() []prometheus.Collector {
	m := e.metrics
	return []prometheus.Collector{m.executed, m.failed, m.retried, m.idempotent, m.attempts, m.duration}
}

// Stats are totals since the executor was made, for demos and benchmarks
// (the Prometheus collectors carry the same counts by type).
type Stats struct {
	Executed   uint64 // committed with a new outcome
	Rejected   uint64 // a handler's own error
	Exhausted  uint64 // gave up after MaxAttempts conflicts
	Errors     uint64 // other failures (database, context, invalid command)
	Conflicts  uint64 // appends that failed their condition (each attempt)
	Retries    uint64 // decisions made again after a conflict
	Idempotent uint64 // duplicates answered with the first outcome
}

type stats struct {
	executed, rejected, exhausted, errors, conflicts, retries, idempotent atomic.Uint64
}

// Stats returns the executor's totals.
func (e *Executor) Stats() Stats {
	s := &e.stats
	return Stats{
		Executed: s.executed.Load(), Rejected: s.rejected.Load(), Exhausted: s.exhausted.Load(),
		Errors: s.errors.Load(), Conflicts: s.conflicts.Load(), Retries: s.retries.Load(),
		Idempotent: s.idempotent.Load(),
	}
}
