// Package pgdcbotel turns what pgdcb's components report through their
// Tracer interfaces into OpenTelemetry spans; it is the only package of the
// module that imports OpenTelemetry. One *Tracer implements every
// component's interface: set it in each Config.
//
//	tracer := pgdcbotel.New(nil)
//	store, err := eventstore.New(pool, &eventstore.Config{Tracer: tracer})
//	exec, err := commands.New(store, &commands.Config{Tracer: tracer})
//
// The store's spans: each append is a span named "pgdcb.append" and each read a span named
// "pgdcb." + its op ("pgdcb.read", "pgdcb.read_last", "pgdcb.read_tail",
// "pgdcb.head", "pgdcb.project"), a child of the span in the call's context.
// Attributes (docs/METRICS.md lists them): pgdcb.outcome (committed,
// condition_failed, idempotent, invalid, unknown, error; ok for reads),
// pgdcb.events, pgdcb.conditional, pgdcb.idempotency, pgdcb.in_tx,
// pgdcb.grouped, pgdcb.group_size and pgdcb.check_items for appends;
// pgdcb.op, pgdcb.query for
// reads. A failed condition and an idempotent refusal are answers, not
// errors: their spans keep an unset status. Every other failure sets the
// span's status to Error and records the error. A statement-level tracer of
// pgx (pgx.QueryTracer) adds the SQL statements as child spans.
//
// The other components' spans: "pgdcb.command" (commands.Config.Tracer),
// "pgdcb.batch" (Config.Tracer of subscriptions, projections and outbox
// relays), "pgdcb.outbox.publish" (outbox.Config.DeliveryTracer),
// "pgdcb.effect.attempt" (effects.Config.Tracer),
// "pgdcb.runstore.append_event" and "pgdcb.runstore.fetch_events"
// (runstore.Config.Tracer); docs/METRICS.md lists their attributes. Each is
// a child of the span in its context, and the work it covers runs under it.
//
// Only the importers of this package depend on OpenTelemetry; the components
// do not. Combine it with pgdcbprom with the component's MultiTracer.
package pgdcbotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/clip"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/pgdcb/pgdcb/pgdcbotel"

// Attribute keys of the spans.
const (
	AttrOutcome     = attribute.Key("pgdcb.outcome")
	AttrEvents      = attribute.Key("pgdcb.events")
	AttrConditional = attribute.Key("pgdcb.conditional")
	AttrIdempotency = attribute.Key("pgdcb.idempotency")
	AttrInTx        = attribute.Key("pgdcb.in_tx")
	AttrGrouped     = attribute.Key("pgdcb.grouped")
	AttrGroupSize   = attribute.Key("pgdcb.group_size")
	AttrCheckItems  = attribute.Key("pgdcb.check_items")
	AttrOp          = attribute.Key("pgdcb.op")
	AttrQuery       = attribute.Key("pgdcb.query")
)

// dbSystem is the OpenTelemetry semantic convention's database attribute.
var dbSystem = attribute.String("db.system.name", "postgresql")

// Config configures a Tracer. The zero value (or nil) means every default.
type Config struct {
	// TracerProvider makes the spans' tracer. Default: the global provider
	// (otel.GetTracerProvider) when New is called.
	TracerProvider trace.TracerProvider
}

// Tracer is an eventstore.Tracer making OpenTelemetry spans. It is safe for
// concurrent use.
type Tracer struct {
	tracer trace.Tracer
}

var _ eventstore.Tracer = (*Tracer)(nil)

// New returns a Tracer.
func New(cfg *Config) *Tracer {
	var tp trace.TracerProvider
	if cfg != nil {
		tp = cfg.TracerProvider
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(ScopeName)}
}

// TraceAppendStart implements eventstore.Tracer.
func (t *Tracer) TraceAppendStart(ctx context.Context, d eventstore.TraceAppendStartData) context.Context {
	conditional := d.Condition != nil && !d.Condition.FailIfEventsMatch.IsEmpty()
	idempotency := d.Condition != nil && !d.Condition.Idempotency.IsEmpty()
	return t.start(ctx, "pgdcb.append", trace.SpanKindInternal, dbSystem, AttrEvents.Int(len(d.Events)),
		AttrConditional.Bool(conditional), AttrIdempotency.Bool(idempotency), AttrInTx.Bool(d.InTx))
}

// TraceAppendEnd implements eventstore.Tracer.
func (t *Tracer) TraceAppendEnd(ctx context.Context, d eventstore.TraceAppendEndData) {
	attrs := []attribute.KeyValue{AttrOutcome.String(string(d.Outcome)), AttrGrouped.Bool(d.Grouped)}
	if d.Grouped {
		attrs = append(attrs, AttrGroupSize.Int(d.GroupSize))
	}
	if d.CheckItems > 0 {
		attrs = append(attrs, AttrCheckItems.Int(d.CheckItems))
	}
	finish(ctx, outcomeErr(d.Outcome, d.Err), attrs...)
}

// TraceReadStart implements eventstore.Tracer.
func (t *Tracer) TraceReadStart(ctx context.Context, d eventstore.TraceReadStartData) context.Context {
	attrs := []attribute.KeyValue{dbSystem, AttrOp.String(string(d.Op)), AttrInTx.Bool(d.InTx)}
	if !d.Query.IsEmpty() {
		attrs = append(attrs, AttrQuery.String(clip.Quote(d.Query.String())))
	}
	return t.start(ctx, "pgdcb."+string(d.Op), trace.SpanKindInternal, attrs...)
}

// TraceReadEnd implements eventstore.Tracer.
func (t *Tracer) TraceReadEnd(ctx context.Context, d eventstore.TraceReadEndData) {
	finish(ctx, outcomeErr(d.Outcome, d.Err), AttrOutcome.String(string(d.Outcome)), AttrEvents.Int(d.Events))
}

// outcomeErr is the error a store span records: none for an answer (a
// failed condition, an idempotent refusal) or a success.
func outcomeErr(o eventstore.Outcome, err error) error {
	switch o {
	case eventstore.OutcomeCommitted, eventstore.OutcomeOK,
		eventstore.OutcomeConditionFailed, eventstore.OutcomeIdempotent:
		return nil
	}
	return err
}

// start starts a span named name as a child of the span in ctx, and returns
// the context carrying it; every span of the package starts here.
func (t *Tracer) start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) context.Context {
	ctx, _ = t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx
}

// finish sets attrs on the span in ctx, records err (if any) as its error
// and ends it; every span of the package ends here.
func finish(ctx context.Context, err error, attrs ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attrs...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
