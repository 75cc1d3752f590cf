package pgdcbprom

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/outbox/outboxtrace"
)

// OutboxMetrics is an outbox.Tracer (and RelayTracer) exporting the
// deliveries of the relays running in this process as gauges, labelled by
// relay name (outbox.CheckpointName) and computed when scraped:
// pgdcb_outbox_last_ack_timestamp_seconds, pgdcb_outbox_in_flight_seconds
// and pgdcb_outbox_stalled (docs/METRICS.md). Set it as
// outbox.Config.DeliveryTracer and register it:
//
//	m := pgdcbprom.NewOutboxMetrics()
//	registry.MustRegister(m.Collectors()...)
//	relay, err := outbox.New(store, topic, "nats", pub, &outbox.Config{DeliveryTracer: m,
//		ReaderConfig: projection.ReaderConfig{Tracer: readerMetrics}})
//
// A relay reports while its Run runs. The relays' batches, errors, lag and
// leadership are NewReaderMetrics', set as outbox.Config's
// ReaderConfig.Tracer.
type OutboxMetrics struct {
	lastAck, inFlight, stalled *prometheus.Desc

	mu     sync.Mutex
	relays map[outboxtrace.Relay]int // relay -> its running Runs
}

var (
	_ outboxtrace.Tracer      = (*OutboxMetrics)(nil)
	_ outboxtrace.RelayTracer = (*OutboxMetrics)(nil)
	_ prometheus.Collector    = (*OutboxMetrics)(nil)
)

// NewOutboxMetrics returns the relays' delivery collector.
func NewOutboxMetrics() *OutboxMetrics {
	const namespace = "pgdcb"
	l := []string{"name"}
	return &OutboxMetrics{
		lastAck: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "last_ack_timestamp_seconds"),
			"Unix time of the broker's last ack of a whole batch; 0 if none since the process started.", l, nil),
		inFlight: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "in_flight_seconds"),
			"How long the oldest message not acknowledged yet has waited for its ack (across retries); 0 when none waits.", l, nil),
		stalled: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "stalled"),
			"1 while a message has waited for its ack for Config.StallAfter or more: alert on it.", l, nil),
		relays: map[outboxtrace.Relay]int{},
	}
}

// Collectors returns the relays' delivery collector, for the caller to
// register.
func (m *OutboxMetrics) Collectors() []prometheus.Collector { return []prometheus.Collector{m} }

// TraceDeliveryStart implements outbox.Tracer.
func (m *OutboxMetrics) TraceDeliveryStart(ctx context.Context, _ outboxtrace.TraceDeliveryStartData) context.Context {
	return ctx
}

// TraceDeliveryEnd implements outbox.Tracer. The gauges are read from the
// relays at scrape time.
func (m *OutboxMetrics) TraceDeliveryEnd(context.Context, outboxtrace.TraceDeliveryEndData) {}

// TraceRelayStart implements outbox.RelayTracer.
func (m *OutboxMetrics) TraceRelayStart(r outboxtrace.Relay) {
	m.mu.Lock()
	m.relays[r]++
	m.mu.Unlock()
}

// TraceRelayEnd implements outbox.RelayTracer.
func (m *OutboxMetrics) TraceRelayEnd(r outboxtrace.Relay) {
	m.mu.Lock()
	if m.relays[r]--; m.relays[r] <= 0 {
		delete(m.relays, r)
	}
	m.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (m *OutboxMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.lastAck
	ch <- m.inFlight
	ch <- m.stalled
}

// Collect implements prometheus.Collector.
func (m *OutboxMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	relays := make([]outboxtrace.Relay, 0, len(m.relays))
	for r := range m.relays {
		relays = append(relays, r)
	}
	m.mu.Unlock()
	now := time.Now()
	for _, r := range relays {
		d := r.DeliveryState()
		var ack, wait float64
		if !d.LastAckAt.IsZero() {
			ack = float64(d.LastAckAt.UnixNano()) / 1e9
		}
		if !d.InFlightSince.IsZero() {
			wait = now.Sub(d.InFlightSince).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(m.lastAck, prometheus.GaugeValue, ack, r.Name())
		ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, wait, r.Name())
		ch <- prometheus.MustNewConstMetric(m.stalled, prometheus.GaugeValue, b2f(d.Stalled), r.Name())
	}
}
