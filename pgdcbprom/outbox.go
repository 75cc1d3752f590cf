package pgdcbprom

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/outbox"
)

// outboxMetrics is the outbox.Tracer (and RelayTracer) part of metrics: the
// deliveries of the relays running in this process as gauges, labelled by
// relay name (outbox.CheckpointName) and computed when scraped:
// pgdcb_outbox_last_ack_timestamp_seconds, pgdcb_outbox_in_flight_seconds
// and pgdcb_outbox_stalled. A relay reports while its Run runs.
type outboxMetrics struct {
	lastAck, inFlight, stalled *prometheus.Desc

	mu     sync.Mutex
	relays map[*outbox.Relay]int // relay -> its running Runs
}

var (
	_ outbox.Tracer      = (*outboxMetrics)(nil)
	_ outbox.RelayTracer = (*outboxMetrics)(nil)
)

func newOutboxMetrics() *outboxMetrics {
	const namespace = "pgdcb"
	l := []string{"name"}
	return &outboxMetrics{
		lastAck: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "last_ack_timestamp_seconds"),
			"Unix time of the broker's last ack of a whole batch; 0 if none since the process started.", l, nil),
		inFlight: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "in_flight_seconds"),
			"How long the oldest message not acknowledged yet has waited for its ack (across retries); 0 when none waits.", l, nil),
		stalled: prometheus.NewDesc(prometheus.BuildFQName(namespace, "outbox", "stalled"),
			"1 while a message has waited for its ack for Config.StallAfter or more: alert on it.", l, nil),
		relays: map[*outbox.Relay]int{},
	}
}

// TraceDeliveryStart implements outbox.Tracer.
func (m *outboxMetrics) TraceDeliveryStart(ctx context.Context, _ outbox.TraceDeliveryData) context.Context {
	return ctx
}

// TraceDeliveryEnd implements outbox.Tracer. The gauges are read from the
// relays at scrape time.
func (m *outboxMetrics) TraceDeliveryEnd(context.Context, outbox.TraceDeliveryData) {}

// TraceRelayStart implements outbox.RelayTracer.
func (m *outboxMetrics) TraceRelayStart(r *outbox.Relay) {
	m.mu.Lock()
	m.relays[r]++
	m.mu.Unlock()
}

// TraceRelayEnd implements outbox.RelayTracer.
func (m *outboxMetrics) TraceRelayEnd(r *outbox.Relay) {
	m.mu.Lock()
	if m.relays[r]--; m.relays[r] <= 0 {
		delete(m.relays, r)
	}
	m.mu.Unlock()
}

func (m *outboxMetrics) describe(ch chan<- *prometheus.Desc) {
	ch <- m.lastAck
	ch <- m.inFlight
	ch <- m.stalled
}

func (m *outboxMetrics) collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	relays := make([]*outbox.Relay, 0, len(m.relays))
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
