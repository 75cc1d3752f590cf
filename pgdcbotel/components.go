package pgdcbotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/outbox/outboxtrace"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/subscription"
)

// Attribute keys of the components' spans.
const (
	AttrCommandType = attribute.Key("pgdcb.command.type")
	AttrCommandID   = attribute.Key("pgdcb.command.id")
	AttrResult      = attribute.Key("pgdcb.result")
	AttrAttempts    = attribute.Key("pgdcb.attempts")
	AttrRetries     = attribute.Key("pgdcb.retries")
	AttrReader      = attribute.Key("pgdcb.reader")
	AttrReaderKind  = attribute.Key("pgdcb.reader.kind")
	AttrCommitted   = attribute.Key("pgdcb.committed")
	AttrRelay       = attribute.Key("pgdcb.relay")
	AttrTopic       = attribute.Key("pgdcb.topic")
	AttrMessages    = attribute.Key("pgdcb.messages")
	AttrEffectID    = attribute.Key("pgdcb.effect.id")
	AttrEffectType  = attribute.Key("pgdcb.effect.type")
	AttrSession     = attribute.Key("pgdcb.effect.session")
	AttrAttempt     = attribute.Key("pgdcb.attempt")
	AttrWorker      = attribute.Key("pgdcb.worker")
	AttrTakeover    = attribute.Key("pgdcb.takeover")
	AttrRunID       = attribute.Key("pgdcb.run_id")
	AttrEventType   = attribute.Key("pgdcb.event_type")
	AttrRunSeq      = attribute.Key("pgdcb.run_seq")
	AttrIdempotent  = attribute.Key("pgdcb.idempotent")
)

var (
	_ commands.Tracer     = (*Tracer)(nil)
	_ subscription.Tracer = (*Tracer)(nil)
	_ outboxtrace.Tracer  = (*Tracer)(nil)
	_ effects.Tracer      = (*Tracer)(nil)
	_ runstore.Tracer     = (*Tracer)(nil)
)

// TraceExecuteStart implements commands.Tracer: a span "pgdcb.command".
func (t *Tracer) TraceExecuteStart(ctx context.Context, d commands.TraceExecuteStartData) context.Context {
	return t.start(ctx, "pgdcb.command", trace.SpanKindInternal, AttrCommandType.String(d.Type))
}

// TraceExecuteEnd implements commands.Tracer. A rejection, a duplicate and
// giving up on conflicts are answers: their status stays unset.
func (t *Tracer) TraceExecuteEnd(ctx context.Context, d commands.TraceExecuteEndData) {
	var err error
	if d.Result == commands.ResultError || d.Result == commands.ResultInvalid {
		err = d.Err
	}
	finish(ctx, err, AttrCommandID.String(d.CommandID.String()), AttrResult.String(string(d.Result)),
		AttrAttempts.Int(d.Attempts), AttrRetries.Int(d.Retries))
}

// TraceBatchStart implements subscription.Tracer: a span "pgdcb.batch" per
// batch of a subscription, projection or outbox relay.
func (t *Tracer) TraceBatchStart(ctx context.Context, d subscription.TraceBatchStartData) context.Context {
	return t.start(ctx, "pgdcb.batch", trace.SpanKindConsumer, AttrReader.String(d.Name),
		AttrReaderKind.String(d.Kind), AttrEvents.Int(d.Events))
}

// TraceBatchEnd implements subscription.Tracer.
func (t *Tracer) TraceBatchEnd(ctx context.Context, d subscription.TraceBatchEndData) {
	finish(ctx, d.Err, AttrCommitted.Bool(d.Committed))
}

// TraceDeliveryStart implements outboxtrace.Tracer: a span "pgdcb.outbox.publish"
// per publish, a child of the relay's batch span.
func (t *Tracer) TraceDeliveryStart(ctx context.Context, d outboxtrace.TraceDeliveryStartData) context.Context {
	return t.start(ctx, "pgdcb.outbox.publish", trace.SpanKindProducer, AttrRelay.String(d.Relay),
		AttrTopic.String(d.Topic), AttrMessages.Int(d.Messages))
}

// TraceDeliveryEnd implements outboxtrace.Tracer.
func (t *Tracer) TraceDeliveryEnd(ctx context.Context, d outboxtrace.TraceDeliveryEndData) {
	finish(ctx, d.Err)
}

// TraceAttemptStart implements effects.Tracer: a span "pgdcb.effect.attempt"
// per attempt, the handler's context.
func (t *Tracer) TraceAttemptStart(ctx context.Context, d effects.TraceAttemptStartData) context.Context {
	return t.start(ctx, "pgdcb.effect.attempt", trace.SpanKindInternal, AttrEffectID.String(d.EffectID),
		AttrEffectType.String(d.Type), AttrSession.String(d.Session), AttrAttempt.Int(d.Attempt),
		AttrWorker.String(d.Worker), AttrTakeover.Bool(d.Takeover))
}

// TraceAttemptEnd implements effects.Tracer: the handler's error, else the
// recording's, is the span's error.
func (t *Tracer) TraceAttemptEnd(ctx context.Context, d effects.TraceAttemptEndData) {
	err := d.Err
	if err == nil {
		err = d.RecordErr
	}
	finish(ctx, err)
}

// TraceRunAppendStart implements runstore.Tracer: a span
// "pgdcb.runstore.append_event".
func (t *Tracer) TraceRunAppendStart(ctx context.Context, d runstore.TraceRunAppendStartData) context.Context {
	return t.start(ctx, "pgdcb.runstore.append_event", trace.SpanKindInternal, dbSystem,
		AttrRunID.String(d.RunID), AttrEventType.String(d.EventType))
}

// TraceRunAppendEnd implements runstore.Tracer.
func (t *Tracer) TraceRunAppendEnd(ctx context.Context, d runstore.TraceRunAppendEndData) {
	attrs := []attribute.KeyValue{AttrRetries.Int(d.Retries)}
	if d.Err == nil {
		attrs = append(attrs, AttrRunSeq.Int64(d.Result.RunSeq), AttrIdempotent.Bool(d.Result.Idempotent))
	}
	finish(ctx, d.Err, attrs...)
}

// TraceRunFetchStart implements runstore.Tracer: a span
// "pgdcb.runstore.fetch_events".
func (t *Tracer) TraceRunFetchStart(ctx context.Context, d runstore.TraceRunFetchStartData) context.Context {
	return t.start(ctx, "pgdcb.runstore.fetch_events", trace.SpanKindInternal, dbSystem, AttrRunID.String(d.RunID))
}

// TraceRunFetchEnd implements runstore.Tracer.
func (t *Tracer) TraceRunFetchEnd(ctx context.Context, d runstore.TraceRunFetchEndData) {
	finish(ctx, d.Err, AttrEvents.Int(d.Events))
}
