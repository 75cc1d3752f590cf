package pgdcbprom

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/query"
)

// commandsMetrics is the commands.Tracer part of metrics: the executor's
// pgdcb_commands_…, labelled by command type.
type commandsMetrics struct {
	executed   *prometheus.CounterVec
	failed     *prometheus.CounterVec
	retried    *prometheus.CounterVec
	idempotent *prometheus.CounterVec
	attempts   *prometheus.HistogramVec
	duration   *prometheus.HistogramVec
}

var _ commands.Tracer = (*commandsMetrics)(nil)

func newCommandsMetrics() *commandsMetrics {
	const ns = "pgdcb"
	return &commandsMetrics{
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

func (m *commandsMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.executed, m.failed, m.retried, m.idempotent, m.attempts, m.duration}
}

// TraceExecuteStart implements commands.Tracer.
func (m *commandsMetrics) TraceExecuteStart(ctx context.Context, _ commands.TraceExecuteData) context.Context {
	return ctx
}

// TraceExecuteEnd implements commands.Tracer.
func (m *commandsMetrics) TraceExecuteEnd(_ context.Context, d commands.TraceExecuteData) {
	typ := d.Type
	if d.Result == commands.ResultInvalid && query.ValidateType(typ) != nil {
		typ = "invalid" // a label value the caller cannot make unbounded
	}
	if d.Retries > 0 {
		m.retried.WithLabelValues(typ).Add(float64(d.Retries))
	}
	if d.Attempts > 0 {
		m.attempts.WithLabelValues(typ).Observe(float64(d.Attempts))
	}
	switch d.Result {
	case commands.ResultExecuted:
		m.executed.WithLabelValues(typ).Inc()
	case commands.ResultDuplicate:
		m.idempotent.WithLabelValues(typ).Inc()
	case commands.ResultRejected, commands.ResultConflict:
		m.failed.WithLabelValues(typ, string(d.Result)).Inc()
	case commands.ResultInvalid, commands.ResultError:
		m.failed.WithLabelValues(typ, "error").Inc()
	}
	if d.Result != commands.ResultInvalid {
		m.duration.WithLabelValues(typ).Observe(d.Duration.Seconds())
	}
}
