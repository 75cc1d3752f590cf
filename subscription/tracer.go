package subscription

import (
	"context"
	"time"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/multitrace"
)

// Tracer observes the batches of tailing readers — subscriptions,
// projections (package projection) and outbox relays (package outbox, whose
// relays run as projections) — in the style of eventstore.Tracer:
// TraceBatchStart may return a derived context (carrying a span, say) that
// the handler runs under and that TraceBatchEnd receives. Set it in the
// readers' Config.Tracer; nil (the default) costs nothing.
//
// A Tracer that also implements StatusTracer receives the readers' state
// (errors, lag, leadership, FAILED, replication slot), found by type
// assertion as pgx finds its optional tracers.
//
// Package pgdcbprom turns the calls into Prometheus metrics
// (pgdcbprom.New, pgdcb_reader_…) and package pgdcbotel into
// OpenTelemetry spans; MultiTracer combines tracers. Readers call a Tracer
// from their own goroutines, several at once; a Tracer must not block.
type Tracer interface {
	// TraceBatchStart is called when a batch of events was read, before
	// the handler gets it. Batches without events (a projection's idle
	// checkpoint write, a logical reader's position move) are not traced.
	TraceBatchStart(ctx context.Context, data TraceBatchData) context.Context
	// TraceBatchEnd is called when the batch was handled (for a
	// projection: when its transaction ended).
	TraceBatchEnd(ctx context.Context, data TraceBatchData)
}

// Reader kinds in the trace data.
const (
	KindSubscription = "subscription"
	KindProjection   = "projection" // outbox relays too: they run as projections
)

// TraceBatchData is what TraceBatchStart (Name, Kind, Events, After) and
// TraceBatchEnd receive.
type TraceBatchData struct {
	Name   string // the reader's name: Config.Name, the projection's or relay's checkpoint name
	Kind   string // KindSubscription or KindProjection
	Events int    // events in the batch
	// Committed is true when the batch counts as delivered: the handler
	// returned nil (for a projection: and the checkpoint moved with it in
	// one committed transaction).
	Committed bool
	Duration  time.Duration // from TraceBatchStart
	Err       error         // the handler's or the commit's error; nil if none
	After     cursor.Cursor // TraceBatchStart only: where the batch starts (exclusive)
}

// StatusTracer is an optional interface of a Tracer: the readers' state
// besides their batches. The metrics of package pgdcbprom come from it.
type StatusTracer interface {
	// TraceReaderError is called for each failed read, election, lost
	// leadership, handler call or delivery (the failure is retried, or ends
	// Run).
	TraceReaderError(ctx context.Context, name string, err error)
	// TraceLag is called after each read with how far behind the head the
	// reader is.
	TraceLag(ctx context.Context, name string, lag Lag)
	// TraceLeader is called when a projection (or relay) gains or loses its
	// leader lock in this process.
	TraceLeader(ctx context.Context, name string, leading bool)
	// TraceFailed is called after each projection batch with whether its
	// checkpoint is FAILED.
	TraceFailed(ctx context.Context, name string, failed bool)
	// TraceSlot is called in the logical decoding mode with the state of the
	// reader's replication slot.
	TraceSlot(ctx context.Context, name string, slot SlotStatus)
}

// SlotStatus is a logical reader's replication slot, for StatusTracer.
type SlotStatus struct {
	RetainedBytes int64 // WAL the slot keeps from being recycled (pg_current_wal_lsn() - restart_lsn)
	Lost          bool  // the slot was invalidated (wal_status 'lost')
}

// MultiTracer returns a Tracer calling each non-nil tracer in turn, each
// Start on the context the previous one returned; it passes StatusTracer
// calls to those that implement it.
func MultiTracer(tracers ...Tracer) Tracer { return multiTracer(multitrace.NonNil(tracers)) }

type multiTracer []Tracer

var _ StatusTracer = multiTracer(nil)

func (m multiTracer) TraceBatchStart(ctx context.Context, d TraceBatchData) context.Context {
	return multitrace.Start(m, ctx, d, Tracer.TraceBatchStart)
}

func (m multiTracer) TraceBatchEnd(ctx context.Context, d TraceBatchData) {
	multitrace.End(m, ctx, d, Tracer.TraceBatchEnd)
}

func (m multiTracer) TraceReaderError(ctx context.Context, name string, err error) {
	multitrace.Each(m, func(s StatusTracer) { s.TraceReaderError(ctx, name, err) })
}

func (m multiTracer) TraceLag(ctx context.Context, name string, lag Lag) {
	multitrace.Each(m, func(s StatusTracer) { s.TraceLag(ctx, name, lag) })
}

func (m multiTracer) TraceLeader(ctx context.Context, name string, leading bool) {
	multitrace.Each(m, func(s StatusTracer) { s.TraceLeader(ctx, name, leading) })
}

func (m multiTracer) TraceFailed(ctx context.Context, name string, failed bool) {
	multitrace.Each(m, func(s StatusTracer) { s.TraceFailed(ctx, name, failed) })
}

func (m multiTracer) TraceSlot(ctx context.Context, name string, slot SlotStatus) {
	multitrace.Each(m, func(s StatusTracer) { s.TraceSlot(ctx, name, slot) })
}

// tracing is a reader's Tracer with its StatusTracer found once; its methods
// do nothing for a nil Tracer.
type tracing struct {
	t Tracer
	s StatusTracer
}

func newTracing(t Tracer) tracing {
	s, _ := t.(StatusTracer)
	return tracing{t: t, s: s}
}

// batch traces one batch of n events around handle.
func (tr tracing) batch(ctx context.Context, name string, n int, after cursor.Cursor, handle func(context.Context) error) error {
	if tr.t == nil || n == 0 {
		return handle(ctx)
	}
	start := time.Now()
	ctx = tr.t.TraceBatchStart(ctx, TraceBatchData{Name: name, Kind: KindSubscription, Events: n, After: after})
	err := handle(ctx)
	tr.t.TraceBatchEnd(ctx, TraceBatchData{Name: name, Kind: KindSubscription, Events: n,
		Committed: err == nil, Duration: time.Since(start), Err: err})
	return err
}

func (tr tracing) readerError(ctx context.Context, name string, err error) {
	if tr.s != nil {
		tr.s.TraceReaderError(ctx, name, err)
	}
}

func (tr tracing) lag(ctx context.Context, name string, l Lag) {
	if tr.s != nil {
		tr.s.TraceLag(ctx, name, l)
	}
}
