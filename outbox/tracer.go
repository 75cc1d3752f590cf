package outbox

import (
	"context"
	"time"

	"github.com/pgdcb/pgdcb/internal/multitrace"
)

// Tracer observes a relay's deliveries to its publisher, in the style of
// eventstore.Tracer: TraceDeliveryStart may return a derived context
// (carrying a span, say) that the publish runs under and that
// TraceDeliveryEnd receives. Set it in Config.DeliveryTracer; nil (the
// default) costs nothing. The relay's batches, errors, lag and leadership are
// traced as a projection's, by the Tracer of Config.ReaderConfig (a
// subscription.Tracer).
//
// A Tracer that also implements RelayTracer is told when a relay's Run
// starts and returns, to read its DeliveryState whenever it likes.
//
// Package pgdcbprom turns the calls into Prometheus gauges
// (pgdcbprom.New, pgdcb_outbox_…) and package pgdcbotel into
// OpenTelemetry spans; MultiTracer combines tracers.
type Tracer interface {
	// TraceDeliveryStart is called before each publish of a batch.
	TraceDeliveryStart(ctx context.Context, data TraceDeliveryData) context.Context
	// TraceDeliveryEnd is called when the publish returned (acked or not).
	TraceDeliveryEnd(ctx context.Context, data TraceDeliveryData)
}

// TraceDeliveryData is what TraceDeliveryStart (Relay, Topic, Messages) and
// TraceDeliveryEnd receive.
type TraceDeliveryData struct {
	Relay    string // the relay's name (CheckpointName)
	Topic    string
	Messages int           // messages in the publish
	Duration time.Duration // the publish, until its ack or failure
	Err      error         // nil: the broker acknowledged every message
}

// RelayTracer is an optional interface of a Tracer: TraceRelayStart is called
// when a relay's Run starts and TraceRelayEnd when it returns.
type RelayTracer interface {
	TraceRelayStart(r *Relay)
	TraceRelayEnd(r *Relay)
}

// DeliveryState is what this process saw of a relay's broker: the fields of
// the same names in Status, without reading the checkpoint.
type DeliveryState struct {
	LastAckAt     time.Time // the broker's last ack of a whole batch; zero if none since the process started
	InFlightSince time.Time // since when the oldest message not acknowledged yet waits; zero if none, or not leading
	Stalled       bool      // InFlightSince is Config.StallAfter or more ago
}

// MultiTracer returns a Tracer calling each non-nil tracer in turn, each
// Start on the context the previous one returned; it passes RelayTracer calls
// to those that implement it.
func MultiTracer(tracers ...Tracer) Tracer { return multiTracer(multitrace.NonNil(tracers)) }

type multiTracer []Tracer

var _ RelayTracer = multiTracer(nil)

func (m multiTracer) TraceDeliveryStart(ctx context.Context, d TraceDeliveryData) context.Context {
	return multitrace.Start(m, ctx, d, Tracer.TraceDeliveryStart)
}

func (m multiTracer) TraceDeliveryEnd(ctx context.Context, d TraceDeliveryData) {
	multitrace.End(m, ctx, d, Tracer.TraceDeliveryEnd)
}

func (m multiTracer) TraceRelayStart(r *Relay) {
	multitrace.Each(m, func(rt RelayTracer) { rt.TraceRelayStart(r) })
}

func (m multiTracer) TraceRelayEnd(r *Relay) {
	multitrace.Each(m, func(rt RelayTracer) { rt.TraceRelayEnd(r) })
}

// DeliveryState returns what this process saw of the relay's broker, in
// memory.
func (r *Relay) DeliveryState() DeliveryState {
	var d DeliveryState
	d.LastAckAt, d.InFlightSince, d.Stalled = r.delivery.snapshot(time.Now(), r.runner.IsLeader())
	return d
}
