package effects

import (
	"context"
	"time"

	"github.com/pgdcb/pgdcb/internal/multitrace"
)

// Tracer observes a worker's attempts, in the style of eventstore.Tracer:
// TraceAttemptStart may return a derived context (carrying a span, say) that
// the handler runs under and that TraceAttemptEnd receives. Set it in
// Config.Tracer; nil (the default) costs nothing. MultiTracer combines
// tracers; package pgdcbotel makes spans of the attempts. The worker's
// counters (Worker.Stats) and backlog (Worker.Backlog) are read when wanted:
// pgdcbprom.Metrics.WatchEffects exports them to Prometheus.
type Tracer interface {
	// TraceAttemptStart is called when the worker claimed an effect, before
	// its handler runs.
	TraceAttemptStart(ctx context.Context, data TraceAttemptData) context.Context
	// TraceAttemptEnd is called when the attempt's result was recorded (or
	// not: a lost lease, a stopping worker).
	TraceAttemptEnd(ctx context.Context, data TraceAttemptData)
}

// TraceAttemptData is what TraceAttemptStart (Worker, EffectID, Type,
// Session, Attempt, Takeover) and TraceAttemptEnd receive.
type TraceAttemptData struct {
	Worker   string // Config.Identity
	EffectID string
	Type     string
	Session  string
	Attempt  int           // 1 for the first attempt
	Duration time.Duration // the handler and the recording of its result
	// Err is the handler's error (or one naming the value it panicked
	// with); nil: it succeeded.
	Err error
	// RecordErr is why the result could not be recorded; nil when it was
	// recorded, when another worker had taken the effect over, or when the
	// worker stopped during the handler (the claim then expires).
	RecordErr error
	Takeover  bool // TraceAttemptStart only: the previous attempt's lease had expired without a result
}

// MultiTracer returns a Tracer calling each non-nil tracer in turn, each
// Start on the context the previous one returned.
func MultiTracer(tracers ...Tracer) Tracer { return multiTracer(multitrace.NonNil(tracers)) }

type multiTracer []Tracer

func (m multiTracer) TraceAttemptStart(ctx context.Context, d TraceAttemptData) context.Context {
	return multitrace.Start(m, ctx, d, Tracer.TraceAttemptStart)
}

func (m multiTracer) TraceAttemptEnd(ctx context.Context, d TraceAttemptData) {
	multitrace.End(m, ctx, d, Tracer.TraceAttemptEnd)
}
