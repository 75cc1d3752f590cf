package outbox

import (
	"time"

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

// MultiTracer returns a Tracer calling each non-nil tracer in turn (see
// outboxtrace.MultiTracer).
func MultiTracer(tracers ...Tracer) Tracer { return outboxtrace.MultiTracer(tracers...) }

var _ outboxtrace.Relay = (*Relay)(nil)

// DeliveryState returns what this process saw of the relay's broker, in
// memory.
func (r *Relay) DeliveryState() DeliveryState {
	var d DeliveryState
	d.LastAckAt, d.InFlightSince, d.Stalled = r.delivery.snapshot(time.Now(), r.runner.IsLeader())
	return d
}
