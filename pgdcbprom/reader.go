package pgdcbprom

import (
	"context"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/subscription"
)

// readerMetrics is the subscription.Tracer (and StatusTracer) part of
// metrics: the tailing readers' pgdcb_reader_…, labelled by reader name.
type readerMetrics struct {
	batches     *prometheus.CounterVec
	events      *prometheus.CounterVec
	errors      *prometheus.CounterVec
	lagEvents   *prometheus.GaugeVec
	lagSeconds  *prometheus.GaugeVec
	horizonHeld *prometheus.GaugeVec
	holder      *prometheus.GaugeVec
	leader      *prometheus.GaugeVec
	failed      *prometheus.GaugeVec
	slotWAL     *prometheus.GaugeVec
	slotLost    *prometheus.GaugeVec
	all         []prometheus.Collector

	mu      sync.Mutex
	holders map[string][2]string // reader name -> the holder series' pid and database labels
}

var (
	_ subscription.Tracer       = (*readerMetrics)(nil)
	_ subscription.StatusTracer = (*readerMetrics)(nil)
)

func newReaderMetrics() *readerMetrics {
	const namespace = "pgdcb"
	l := []string{"name"}
	m := &readerMetrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "reader",
			Name: "batches_total", Help: "Batches handled (committed) by the reader."}, l),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "reader",
			Name: "events_delivered_total", Help: "Events delivered to the reader's handler and committed."}, l),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "reader",
			Name: "errors_total", Help: "Failed reads, handler errors and failed deliveries."}, l),
		lagEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "reader",
			Name: "lag_events", Help: "Approximate events between the reader's cursor and the head of the log (position difference, all types)."}, l),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "reader",
			Name: "lag_seconds", Help: "Age of the last delivered event while the reader is behind the head; 0 when caught up."}, l),
		horizonHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "reader",
			Name: "horizon_held_seconds", Help: "How long the tailing horizon has stayed below the head of the log (an open transaction of the store's database delays the reader)."}, l),
		holder: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "reader",
			Name: "horizon_holder", Help: "1, labelled with the backend pid and database of the transaction holding the reader's horizon, while it is held (pid 0: not known, e.g. a prepared transaction); no series otherwise."},
			[]string{"name", "pid", "database"}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "reader",
			Name: "leader", Help: "1 while this process holds the reader's leader lock."}, l),
		failed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "reader",
			Name: "failed", Help: "1 while the reader's checkpoint is FAILED."}, l),
		slotWAL: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "reader",
			Name: "slot_retained_wal_bytes", Help: "WAL the reader's replication slot keeps from being recycled (pg_current_wal_lsn() - restart_lsn; logical decoding mode only)."}, l),
		slotLost: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "reader",
			Name: "slot_lost", Help: "1 when the reader's replication slot was invalidated (wal_status 'lost'; logical decoding mode only)."}, l),
	}
	m.all = []prometheus.Collector{m.batches, m.events, m.errors, m.lagEvents, m.lagSeconds, m.horizonHeld, m.holder, m.leader, m.failed, m.slotWAL, m.slotLost}
	m.holders = map[string][2]string{}
	return m
}

func (m *readerMetrics) collectors() []prometheus.Collector { return m.all }

// TraceBatchStart implements subscription.Tracer.
func (m *readerMetrics) TraceBatchStart(ctx context.Context, _ subscription.TraceBatchData) context.Context {
	return ctx
}

// TraceBatchEnd implements subscription.Tracer: a committed batch and its
// events.
func (m *readerMetrics) TraceBatchEnd(_ context.Context, d subscription.TraceBatchData) {
	if !d.Committed || d.Events == 0 {
		return
	}
	m.batches.WithLabelValues(d.Name).Inc()
	m.events.WithLabelValues(d.Name).Add(float64(d.Events))
}

// TraceReaderError implements subscription.StatusTracer.
func (m *readerMetrics) TraceReaderError(_ context.Context, name string, _ error) {
	m.errors.WithLabelValues(name).Inc()
}

// TraceLag implements subscription.StatusTracer.
func (m *readerMetrics) TraceLag(_ context.Context, name string, l subscription.Lag) {
	m.lagEvents.WithLabelValues(name).Set(float64(l.Events))
	m.lagSeconds.WithLabelValues(name).Set(l.Behind.Seconds())
	m.horizonHeld.WithLabelValues(name).Set(l.HorizonHeld.Seconds())
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, had := m.holders[name]
	var cur [2]string
	held := l.HorizonHeld > 0
	if held {
		cur = [2]string{strconv.Itoa(l.HorizonHolder.PID), l.HorizonHolder.Database}
	}
	if had && (!held || prev != cur) {
		m.holder.DeleteLabelValues(name, prev[0], prev[1])
		delete(m.holders, name)
	}
	if held {
		m.holder.WithLabelValues(name, cur[0], cur[1]).Set(1)
		m.holders[name] = cur
	}
}

// TraceLeader implements subscription.StatusTracer.
func (m *readerMetrics) TraceLeader(_ context.Context, name string, leading bool) {
	m.leader.WithLabelValues(name).Set(b2f(leading))
}

// TraceFailed implements subscription.StatusTracer.
func (m *readerMetrics) TraceFailed(_ context.Context, name string, failed bool) {
	m.failed.WithLabelValues(name).Set(b2f(failed))
}

// TraceSlot implements subscription.StatusTracer.
func (m *readerMetrics) TraceSlot(_ context.Context, name string, s subscription.SlotStatus) {
	m.slotWAL.WithLabelValues(name).Set(float64(s.RetainedBytes))
	m.slotLost.WithLabelValues(name).Set(b2f(s.Lost))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
