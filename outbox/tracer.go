package outbox

import (
	"context"
	"time"

	"github.com/pgdcb/pgdcb/internal/multitrace"
	"github.com/pgdcb/pgdcb/outbox/outboxtrace"
)

// The relay's hooks (declared in package outboxtrace, which the adapters
// implement). Config.DeliveryTracer takes a Tracer.
type (
	// Tracer observes a relay's deliveries to its publisher: see
	// outboxtrace.Tracer.
	Tracer = outboxtrace.Tracer
	// TraceDeliveryStartData is what Tracer.TraceDeliveryStart receives.
	TraceDeliveryStartData = outboxtrace.TraceDeliveryStartData
	// TraceDeliveryEndData is what Tracer.TraceDeliveryEnd receives.
	TraceDeliveryEndData = outboxtrace.TraceDeliveryEndData
	// RelayTracer is an optional interface of a Tracer, told when a
	// relay's Run starts and returns.
	RelayTracer = outboxtrace.RelayTracer
	// DeliveryState is what this process saw of a relay's broker.
	DeliveryState = outboxtrace.DeliveryState
)

// MultiTracer returns a Tracer calling each non-nil tracer in turn, each
// Start on the context the previous one returned; it passes RelayTracer calls
// to those that implement it.
func MultiTracer(tracers ...Tracer) Tracer { return multiTracer(multitrace.NonNil(tracers)) }

type multiTracer []Tracer

var _ RelayTracer = multiTracer(nil)

func (m multiTracer) TraceDeliveryStart(ctx context.Context, d TraceDeliveryStartData) context.Context {
	return multitrace.Start(m, ctx, d, Tracer.TraceDeliveryStart)
}

func (m multiTracer) TraceDeliveryEnd(ctx context.Context, d TraceDeliveryEndData) {
	multitrace.End(m, ctx, d, Tracer.TraceDeliveryEnd)
}

func (m multiTracer) TraceRelayStart(r outboxtrace.Relay) {
	multitrace.Each(m, func(rt RelayTracer) { rt.TraceRelayStart(r) })
}

func (m multiTracer) TraceRelayEnd(r outboxtrace.Relay) {
	multitrace.Each(m, func(rt RelayTracer) { rt.TraceRelayEnd(r) })
}

var _ outboxtrace.Relay = (*Relay)(nil)

// DeliveryState returns what this process saw of the relay's broker, in
// memory.
func (r *Relay) DeliveryState() DeliveryState {
	var d DeliveryState
	d.LastAckAt, d.InFlightSince, d.Stalled = r.delivery.snapshot(time.Now(), r.runner.IsLeader())
	return d
}
