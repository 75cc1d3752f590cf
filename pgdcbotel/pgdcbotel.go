// Package pgdcbotel turns what pgdcb's components report through their
// Tracer interfaces into OpenTelemetry spans; it is the only package of the
// module that imports OpenTelemetry. The Tracer New returns implements
// every component's interface: set it in each Config.
//
//	tracer := pgdcbotel.New(&pgdcbotel.Config{TracerProvider: provider})
//	store, err := eventstore.New(pool, &eventstore.Config{Tracer: tracer})
//	exec, err := commands.New(store, &commands.Config{Tracer: tracer})
//
// The store's spans: each append is a span named "pgdcb.append" and each
// read a span named "pgdcb." + its op ("pgdcb.read", "pgdcb.read_last",
// "pgdcb.read_tail", "pgdcb.head", "pgdcb.project"), a child of the span in
// the call's context. Attributes (docs/METRICS.md lists them):
// pgdcb.outcome (committed, condition_failed, idempotent, invalid, unknown,
// error; ok for reads), pgdcb.events, pgdcb.conditional, pgdcb.idempotency,
// pgdcb.in_tx, pgdcb.grouped, pgdcb.group_size and pgdcb.check_items for
// appends; pgdcb.op, pgdcb.query for reads. A failed condition and an idempotent refusal are answers, not
// errors: their spans keep an unset status. Every other failure sets the
// span's status to Error and records the error. A statement-level tracer of
// pgx (pgx.QueryTracer) adds the SQL statements as child spans.
//
// The other components' spans and their attributes: "pgdcb.command"
// (commands.Config.Tracer; pgdcb.command.type, pgdcb.command.id,
// pgdcb.result, pgdcb.attempts, pgdcb.retries), "pgdcb.batch" (Config.Tracer
// of subscriptions, projections and outbox relays; pgdcb.reader,
// pgdcb.reader.kind, pgdcb.events, pgdcb.committed), "pgdcb.outbox.publish"
// (outbox.Config.DeliveryTracer; pgdcb.relay, pgdcb.topic, pgdcb.messages),
// "pgdcb.effect.attempt" (effects.Config.Tracer; pgdcb.effect.id,
// pgdcb.effect.type, pgdcb.effect.session, pgdcb.attempt, pgdcb.worker,
// pgdcb.takeover), "pgdcb.runstore.append_event" (runstore.Config.Tracer;
// pgdcb.run_id, pgdcb.event_type, pgdcb.retries, pgdcb.run_seq,
// pgdcb.idempotent) and "pgdcb.runstore.fetch_events" (pgdcb.run_id,
// pgdcb.events). Each is a child of the span in its context, and the work it
// covers runs under it.
//
// The spans' instrumentation scope is "github.com/pgdcb/pgdcb/pgdcbotel".
// Only the importers of this package depend on OpenTelemetry; the components
// do not. Combine it with pgdcbprom with the component's MultiTracer.
package pgdcbotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/subscription"
)

// scopeName is the instrumentation scope of the spans.
const scopeName = "github.com/pgdcb/pgdcb/pgdcbotel"

// Attribute keys of the spans.
const (
	attrOutcome     = attribute.Key("pgdcb.outcome")
	attrEvents      = attribute.Key("pgdcb.events")
	attrConditional = attribute.Key("pgdcb.conditional")
	attrIdempotency = attribute.Key("pgdcb.idempotency")
	attrInTx        = attribute.Key("pgdcb.in_tx")
	attrGrouped     = attribute.Key("pgdcb.grouped")
	attrGroupSize   = attribute.Key("pgdcb.group_size")
	attrCheckItems  = attribute.Key("pgdcb.check_items")
	attrOp          = attribute.Key("pgdcb.op")
	attrQuery       = attribute.Key("pgdcb.query")
)

// dbSystem is the OpenTelemetry semantic convention's database attribute.
var dbSystem = attribute.String("db.system.name", "postgresql")

// Config configures a Tracer. The zero value (or nil) means every default.
type Config struct {
	// TracerProvider makes the spans' tracer. Default: the global provider
	// (otel.GetTracerProvider) when New is called.
	TracerProvider trace.TracerProvider
}

// Tracer is every component's Tracer making OpenTelemetry spans. It is safe
// for concurrent use.
type Tracer interface {
	eventstore.Tracer
	commands.Tracer
	subscription.Tracer
	outbox.Tracer
	effects.Tracer
	runstore.Tracer
}

// tracer implements Tracer.
type tracer struct {
	tracer trace.Tracer
}

var _ Tracer = (*tracer)(nil)

// New returns a Tracer.
func New(cfg *Config) Tracer {
	var tp trace.TracerProvider
	if cfg != nil {
		tp = cfg.TracerProvider
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &tracer{tracer: tp.Tracer(scopeName)}
}

// TraceAppendStart implements eventstore.Tracer.
func (t *tracer) TraceAppendStart(ctx context.Context, d eventstore.TraceAppendStartData) context.Context {
	conditional := d.Condition != nil && !d.Condition.FailIfEventsMatch.IsEmpty()
	idempotency := d.Condition != nil && !d.Condition.Idempotency.IsEmpty()
	return t.start(ctx, "pgdcb.append", trace.SpanKindInternal, dbSystem, attrEvents.Int(len(d.Events)),
		attrConditional.Bool(conditional), attrIdempotency.Bool(idempotency), attrInTx.Bool(d.InTx))
}

// TraceAppendEnd implements eventstore.Tracer.
func (t *tracer) TraceAppendEnd(ctx context.Context, d eventstore.TraceAppendEndData) {
	attrs := []attribute.KeyValue{attrOutcome.String(string(d.Outcome)), attrGrouped.Bool(d.Grouped)}
	if d.Grouped {
		attrs = append(attrs, attrGroupSize.Int(d.GroupSize))
	}
	if d.CheckItems > 0 {
		attrs = append(attrs, attrCheckItems.Int(d.CheckItems))
	}
	finish(ctx, outcomeErr(d.Outcome, d.Err), attrs...)
}

// TraceReadStart implements eventstore.Tracer.
func (t *tracer) TraceReadStart(ctx context.Context, d eventstore.TraceReadStartData) context.Context {
	attrs := []attribute.KeyValue{dbSystem, attrOp.String(string(d.Op)), attrInTx.Bool(d.InTx)}
	if !d.Query.IsEmpty() {
		attrs = append(attrs, attrQuery.String(clip.Quote(d.Query.String())))
	}
	return t.start(ctx, "pgdcb."+string(d.Op), trace.SpanKindInternal, attrs...)
}

// TraceReadEnd implements eventstore.Tracer.
func (t *tracer) TraceReadEnd(ctx context.Context, d eventstore.TraceReadEndData) {
	finish(ctx, outcomeErr(d.Outcome, d.Err), attrOutcome.String(string(d.Outcome)), attrEvents.Int(d.Events))
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
func (t *tracer) start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) context.Context {
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
