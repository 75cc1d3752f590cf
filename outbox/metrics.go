package outbox

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus gauges of relays' deliveries, labelled by relay
// name (CheckpointName), computed when scraped from the relays running in
// this process. Create one with NewMetrics, pass it as Config.DeliveryMetrics
// and register its Collectors yourself (nothing is registered globally):
//
//	m := outbox.NewMetrics()
//	for _, c := range m.Collectors() {
//		registry.MustRegister(c)
//	}
//
// A relay reports while its Run runs. A nil *Metrics records nothing. The
// readers' common metrics (batches, errors, lag, leader, failed) are
// subscription.Metrics, in Config.Metrics.
type Metrics struct {
	lastAck, inFlight, stalled *prometheus.Desc

	mu     sync.Mutex
	relays map[*Relay]struct{}
}

// NewMetrics returns the collector: pgdcb_outbox_last_ack_timestamp_seconds,
// pgdcb_outbox_in_flight_seconds and pgdcb_outbox_stalled
// (docs/METRICS.md).
func NewMetrics() *Metrics {
	const namespace = "pgdcb"
	l := []string{"name"}
	return &Metrics{
		lastAck: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "last_ack_timestamp_seconds"),
			"Unix time of the broker's last ack of a whole batch; 0 if none since the process started.", l, nil),
		inFlight: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "in_flight_seconds"),
			"How long the oldest message not acknowledged yet has waited for its ack (across retries); 0 when none waits.", l, nil),
		stalled: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "stalled"),
			"1 while a message has waited for its ack for Config.StallAfter or more: alert on it.", l, nil),
		relays: map[*Relay]struct{}{},
	}
}

// Collectors returns the relays' delivery collectors, for the caller to
// register.
func (m *Metrics) Collectors() []prometheus.Collector { return []prometheus.Collector{m} }

func (m *Metrics) add(r *Relay) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.relays[r] = struct{}{}
	m.mu.Unlock()
}

func (m *Metrics) remove(r *Relay) {
	if m == nil {
		return
	}
	m.mu.Lock()
	delete(m.relays, r)
	m.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.lastAck
	ch <- m.inFlight
	ch <- m.stalled
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	relays := make([]*Relay, 0, len(m.relays))
	for r := range m.relays {
		relays = append(relays, r)
	}
	m.mu.Unlock()
	now := time.Now()
	for _, r := range relays {
		lastAck, since, stalled := r.delivery.snapshot(now, r.runner.IsLeader())
		var ack, wait, st float64
		if !lastAck.IsZero() {
			ack = float64(lastAck.UnixNano()) / 1e9
		}
		if !since.IsZero() {
			wait = now.Sub(since).Seconds()
		}
		if stalled {
			st = 1
		}
		ch <- prometheus.MustNewConstMetric(m.lastAck, prometheus.GaugeValue, ack, r.name)
		ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, wait, r.name)
		ch <- prometheus.MustNewConstMetric(m.stalled, prometheus.GaugeValue, st, r.name)
	}
}
