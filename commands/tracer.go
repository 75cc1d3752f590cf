package commands

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb/internal/multitrace"
)

// Tracer observes the executor's commands, in the style of
// eventstore.Tracer: TraceExecuteStart may return a derived context (carrying
// a span, say) that Execute runs under and then hands to TraceExecuteEnd.
// Set it in Config.Tracer; nil (the default) costs nothing.
//
// Package pgdcbprom turns the calls into Prometheus metrics
// (pgdcbprom.New) and package pgdcbotel into OpenTelemetry
// spans; MultiTracer combines tracers. The executor calls a Tracer from many
// goroutines at once; a Tracer must not call the executor.
type Tracer interface {
	// TraceExecuteStart is called when Execute starts, before the command is
	// checked.
	TraceExecuteStart(ctx context.Context, data TraceExecuteData) context.Context
	// TraceExecuteEnd is called when Execute returns.
	TraceExecuteEnd(ctx context.Context, data TraceExecuteData)
}

// Result is how an Execute ended, for tracers.
type Result string

// Results of Execute.
const (
	ResultExecuted  Result = "executed"  // committed with a new outcome (or this call's own earlier attempt did)
	ResultDuplicate Result = "duplicate" // the id was executed before: the first outcome was returned
	ResultRejected  Result = "rejected"  // the handler's own error, or its idempotency query matched
	ResultConflict  Result = "conflict"  // gave up after MaxAttempts conflicts (*AttemptsExhaustedError)
	ResultInvalid   Result = "invalid"   // refused before any decision: invalid command, no handler
	ResultError     Result = "error"     // any other failure (store, context, unknown outcome)
)

// TraceExecuteData is what TraceExecuteStart (Type and CommandID, as given:
// CommandID is uuid.Nil when Execute assigns one) and TraceExecuteEnd receive.
type TraceExecuteData struct {
	Type      string    // the command's type, as given
	CommandID uuid.UUID // the command's id (assigned when it had none); uuid.Nil if refused before
	Result    Result
	// Attempts is the decisions the command took when it was executed,
	// rejected by its handler or gave up on conflicts; 0 otherwise.
	Attempts int
	// Retries is how many times a decision was made again (after a
	// conflict, or to settle an unknown outcome).
	Retries  int
	Duration time.Duration // from TraceExecuteStart to the return
	Err      error         // what Execute returned
}

// MultiTracer returns a Tracer calling each non-nil tracer in turn, each
// Start on the context the previous one returned.
func MultiTracer(tracers ...Tracer) Tracer { return multiTracer(multitrace.NonNil(tracers)) }

type multiTracer []Tracer

func (m multiTracer) TraceExecuteStart(ctx context.Context, d TraceExecuteData) context.Context {
	return multitrace.Start(m, ctx, d, Tracer.TraceExecuteStart)
}

func (m multiTracer) TraceExecuteEnd(ctx context.Context, d TraceExecuteData) {
	multitrace.End(m, ctx, d, Tracer.TraceExecuteEnd)
}
