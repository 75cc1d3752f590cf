// Package outboxtrace holds the hooks of package outbox's relays — Tracer,
// RelayTracer and their data — apart from outbox, which imports the NATS
// client, so that tracer implementations (pgdcbprom, pgdcbotel) do not.
// Package outbox re-exports every name here; use those.
package outboxtrace

import (
	"context"
	"time"
)

// Tracer observes a relay's deliveries to its publisher, in the style of
// eventstore.Tracer: TraceDeliveryStart may return a derived context
// (carrying a span, say) that the publish runs under and that
// TraceDeliveryEnd receives. Set it in outbox.Config.DeliveryTracer; nil (the
// default) costs nothing. The relay's batches, errors, lag and leadership are
// traced as a projection's, by the Tracer of outbox.Config.ReaderConfig (a
// subscription.Tracer).
//
// A Tracer that also implements RelayTracer is told when a relay's Run
// starts and returns, to read its DeliveryState whenever it likes.
//
// Package pgdcbprom turns the calls into Prometheus gauges
// (pgdcbprom.New, pgdcb_outbox_…) and package pgdcbotel into
// OpenTelemetry spans; outbox.MultiTracer combines tracers.
type Tracer interface {
	// TraceDeliveryStart is called before each publish of a batch.
	TraceDeliveryStart(ctx context.Context, data TraceDeliveryStartData) context.Context
	// TraceDeliveryEnd is called when the publish returned (acked or not).
	TraceDeliveryEnd(ctx context.Context, data TraceDeliveryEndData)
}

// TraceDeliveryStartData is what TraceDeliveryStart receives.
type TraceDeliveryStartData struct {
	Relay    string // the relay's name (CheckpointName)
	Topic    string
	Messages int // messages in the publish
}

// TraceDeliveryEndData is what TraceDeliveryEnd receives.
type TraceDeliveryEndData struct {
	Relay    string
	Topic    string
	Messages int
	Duration time.Duration // the publish, until its ack or failure
	Err      error         // nil: the broker acknowledged every message
}

// RelayTracer is an optional interface of a Tracer: TraceRelayStart is called
// when a relay's Run starts and TraceRelayEnd when it returns.
type RelayTracer interface {
	TraceRelayStart(r Relay)
	TraceRelayEnd(r Relay)
}

// Relay is what a RelayTracer sees of a relay (an *outbox.Relay).
type Relay interface {
	// Name is the relay's checkpoint name.
	Name() string
	// DeliveryState is what this process saw of the relay's broker, in
	// memory.
	DeliveryState() DeliveryState
}

// DeliveryState is what this process saw of a relay's broker: the fields of
// the same names in outbox.Status, without reading the checkpoint.
type DeliveryState struct {
	LastAckAt     time.Time // the broker's last ack of a whole batch; zero if none since the process started
	InFlightSince time.Time // since when the oldest message not acknowledged yet waits; zero if none, or not leading
	Stalled       bool      // InFlightSince is Config.StallAfter or more ago
}
