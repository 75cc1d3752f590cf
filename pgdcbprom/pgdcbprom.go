// Package pgdcbprom turns what pgdcb's components report through their
// Tracer interfaces into Prometheus metrics; it is the only package of the
// module that imports the Prometheus client. For the event store, set a
// *Tracer as eventstore.Config.Tracer and register its Collectors yourself
// (nothing is registered globally):
//
//	t := pgdcbprom.New()
//	for _, c := range t.Collectors() {
//		registry.MustRegister(c)
//	}
//	store, err := eventstore.New(pool, &eventstore.Config{Tracer: t})
//
// NewStoreCollector exports the store's group-commit and settle counters
// too:
//
//	registry.MustRegister(pgdcbprom.NewStoreCollector(store))
//
// The other components, each set in its Config.Tracer (or reading the
// component) and registered likewise: NewReaderMetrics (subscriptions,
// projections, outbox relays: pgdcb_reader_…), NewOutboxMetrics
// (outbox.Config.DeliveryTracer: pgdcb_outbox_…), NewCommandsMetrics
// (pgdcb_commands_…), NewRunstoreMetrics (pgdcb_runstore_…) and
// NewEffectsCollector (pgdcb_effects_…).
//
// The metrics are named pgdcb_<component>_… (docs/METRICS.md lists them). For
// several stores in one registry, register each tracer's collectors through
// prometheus.WrapRegistererWith with a label telling them apart. Combine an
// adapter with other tracers (package pgdcbotel) with the component's
// MultiTracer (eventstore.MultiTracer, commands.MultiTracer, …).
//
// Only the importers of this package depend on the Prometheus client; the
// components do not.
package pgdcbprom

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/eventstore"
)

// Tracer is an eventstore.Tracer recording Prometheus metrics. It is safe
// for concurrent use.
type Tracer struct {
	appendDuration *prometheus.HistogramVec
	conflicts      prometheus.Counter
	idempotent     prometheus.Counter
	eventsAppended prometheus.Counter
	grouped        prometheus.Counter
	groupSize      prometheus.Histogram
	checkItems     prometheus.Counter
	readDuration   *prometheus.HistogramVec
	eventsRead     *prometheus.CounterVec
}

var _ eventstore.Tracer = (*Tracer)(nil)

// durationBuckets are the buckets of the duration histograms, in seconds:
// 100µs doubling to about 3.3s.
var durationBuckets = prometheus.ExponentialBuckets(0.0001, 2, 16)

// New returns a Tracer with its collectors.
func New() *Tracer {
	const ns, sub = "pgdcb", "store"
	return &Tracer{
		appendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "append_duration_seconds",
			Help:    "Time of Append, AppendIf and their Tx forms, by outcome (committed, condition_failed, idempotent, invalid, unknown, error); its count is the appends by outcome.",
			Buckets: durationBuckets,
		}, []string{"outcome"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "append_conflicts_total",
			Help: "Appends whose condition failed (pgdcb.ErrConditionFailed): someone else decided first.",
		}),
		idempotent: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "append_idempotent_total",
			Help: "Appends refused as already applied (pgdcb.ErrIdempotent).",
		}),
		eventsAppended: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "events_appended_total",
			Help: "Events of the appends that committed.",
		}),
		grouped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "appends_grouped_total",
			Help: "Appends sent in one server call with other appends (group commit, on unless Config.GroupCommitDisabled).",
		}),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "append_group_size",
			Help:    "Appends in the server call of each grouped append (observed once per member, so it is weighted by member); its count equals appends_grouped_total.",
			Buckets: prometheus.ExponentialBuckets(2, 2, 7), // 2 to 128
		}),
		checkItems: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "append_check_items_total",
			Help: "Query items checked by AppendIf calls the server decided (committed, condition failed, idempotent): one check statement each. The rows they read: pg_stat_user_indexes.idx_tup_read.",
		}),
		readDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "read_duration_seconds",
			Help:    "Time of reads, by op (read, read_last, read_tail, head, project) and outcome (ok, invalid, error); its count is the reads.",
			Buckets: durationBuckets,
		}, []string{"op", "outcome"}),
		eventsRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "events_read_total",
			Help: "Events read from the server, by op.",
		}, []string{"op"}),
	}
}

// Collectors returns the tracer's Prometheus collectors, for the caller to
// register.
func (t *Tracer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{t.appendDuration, t.conflicts, t.idempotent, t.eventsAppended, t.grouped,
		t.groupSize, t.checkItems, t.readDuration, t.eventsRead}
}

// TraceAppendStart implements eventstore.Tracer.
func (t *Tracer) TraceAppendStart(ctx context.Context, _ eventstore.TraceAppendStartData) context.Context {
	return ctx
}

// TraceAppendEnd implements eventstore.Tracer.
func (t *Tracer) TraceAppendEnd(_ context.Context, d eventstore.TraceAppendEndData) {
	t.appendDuration.WithLabelValues(string(d.Outcome)).Observe(d.Duration.Seconds())
	switch d.Outcome {
	case eventstore.OutcomeCommitted:
		t.eventsAppended.Add(float64(d.Events))
	case eventstore.OutcomeConditionFailed:
		t.conflicts.Inc()
	case eventstore.OutcomeIdempotent:
		t.idempotent.Inc()
	}
	if d.Grouped {
		t.grouped.Inc()
		t.groupSize.Observe(float64(d.GroupSize))
	}
	if d.CheckItems > 0 {
		t.checkItems.Add(float64(d.CheckItems))
	}
}

// TraceReadStart implements eventstore.Tracer.
func (t *Tracer) TraceReadStart(ctx context.Context, _ eventstore.TraceReadStartData) context.Context {
	return ctx
}

// TraceReadEnd implements eventstore.Tracer.
func (t *Tracer) TraceReadEnd(_ context.Context, d eventstore.TraceReadEndData) {
	t.readDuration.WithLabelValues(string(d.Op), string(d.Outcome)).Observe(d.Duration.Seconds())
	if d.Events > 0 {
		t.eventsRead.WithLabelValues(string(d.Op)).Add(float64(d.Events))
	}
}
