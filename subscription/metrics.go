package subscription

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus collectors of tailing readers (subscriptions,
// projections, outbox relays), named pgdcb_reader_… and labelled by reader
// name (docs/METRICS.md). Create one with NewMetrics, pass it in the readers'
// Configs and register its Collectors yourself (nothing is registered
// globally):
//
//	m := subscription.NewMetrics()
//	for _, c := range m.Collectors() {
//		registry.MustRegister(c)
//	}
//
// A nil *Metrics records nothing.
type Metrics struct {
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

// NewMetrics returns the collectors.
func NewMetrics() *Metrics {
	const namespace = "pgdcb"
	l := []string{"name"}
	m := &Metrics{
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

// Collectors returns the readers' Prometheus collectors, for the caller to
// register.
func (m *Metrics) Collectors() []prometheus.Collector { return m.all }

// Batch records a committed batch of n events.
func (m *Metrics) Batch(name string, n int) {
	if m == nil {
		return
	}
	m.batches.WithLabelValues(name).Inc()
	m.events.WithLabelValues(name).Add(float64(n))
}

// Error records a failed read, handler call or delivery.
func (m *Metrics) Error(name string) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(name).Inc()
}

// Lag records how far behind the head the reader is.
func (m *Metrics) Lag(name string, l Lag) {
	if m == nil {
		return
	}
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

// Leader records whether this process leads the reader.
func (m *Metrics) Leader(name string, leading bool) {
	if m == nil {
		return
	}
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.WithLabelValues(name).Set(v)
}

// Failed records whether the reader's checkpoint is FAILED.
func (m *Metrics) Failed(name string, failed bool) {
	if m == nil {
		return
	}
	v := 0.0
	if failed {
		v = 1
	}
	m.failed.WithLabelValues(name).Set(v)
}

// Slot records the WAL a logical reader's replication slot retains, and
// whether the slot was invalidated.
func (m *Metrics) Slot(name string, retainedBytes int64, lost bool) {
	if m == nil {
		return
	}
	m.slotWAL.WithLabelValues(name).Set(float64(retainedBytes))
	v := 0.0
	if lost {
		v = 1
	}
	m.slotLost.WithLabelValues(name).Set(v)
}
