package pgdcbprom

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/eventstore"
)

// storeTracer is the eventstore.Tracer part of metrics: pgdcb_store_….
type storeTracer struct {
	used           atomic.Bool // a store traced: its series are collected
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

var _ eventstore.Tracer = (*storeTracer)(nil)

// durationBuckets are the buckets of the duration histograms, in seconds:
// 100µs doubling to about 3.3s.
var durationBuckets = prometheus.ExponentialBuckets(0.0001, 2, 16)

func newStoreTracer() *storeTracer {
	const ns, sub = "pgdcb", "store"
	return &storeTracer{
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

func (t *storeTracer) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.appendDuration, t.conflicts, t.idempotent, t.eventsAppended, t.grouped,
		t.groupSize, t.checkItems, t.readDuration, t.eventsRead}
}

// TraceAppendStart implements eventstore.Tracer.
func (t *storeTracer) TraceAppendStart(ctx context.Context, _ eventstore.TraceAppendStartData) context.Context {
	return ctx
}

// TraceAppendEnd implements eventstore.Tracer.
func (t *storeTracer) TraceAppendEnd(_ context.Context, d eventstore.TraceAppendEndData) {
	t.used.Store(true)
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
func (t *storeTracer) TraceReadStart(ctx context.Context, _ eventstore.TraceReadStartData) context.Context {
	return ctx
}

// TraceReadEnd implements eventstore.Tracer.
func (t *storeTracer) TraceReadEnd(_ context.Context, d eventstore.TraceReadEndData) {
	t.used.Store(true)
	t.readDuration.WithLabelValues(string(d.Op), string(d.Outcome)).Observe(d.Duration.Seconds())
	if d.Events > 0 {
		t.eventsRead.WithLabelValues(string(d.Op)).Add(float64(d.Events))
	}
}
