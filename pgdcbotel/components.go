package pgdcbotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/subscription"
)

// Attribute keys of the components' spans.
const (
	attrCommandType = attribute.Key("pgdcb.command.type")
	attrCommandID   = attribute.Key("pgdcb.command.id")
	attrResult      = attribute.Key("pgdcb.result")
	attrAttempts    = attribute.Key("pgdcb.attempts")
	attrRetries     = attribute.Key("pgdcb.retries")
	attrReader      = attribute.Key("pgdcb.reader")
	attrReaderKind  = attribute.Key("pgdcb.reader.kind")
	attrCommitted   = attribute.Key("pgdcb.committed")
	attrRelay       = attribute.Key("pgdcb.relay")
	attrTopic       = attribute.Key("pgdcb.topic")
	attrMessages    = attribute.Key("pgdcb.messages")
	attrEffectID    = attribute.Key("pgdcb.effect.id")
	attrEffectType  = attribute.Key("pgdcb.effect.type")
	attrSession     = attribute.Key("pgdcb.effect.session")
	attrAttempt     = attribute.Key("pgdcb.attempt")
	attrWorker      = attribute.Key("pgdcb.worker")
	attrTakeover    = attribute.Key("pgdcb.takeover")
	attrRunID       = attribute.Key("pgdcb.run_id")
	attrEventType   = attribute.Key("pgdcb.event_type")
	attrRunSeq      = attribute.Key("pgdcb.run_seq")
	attrIdempotent  = attribute.Key("pgdcb.idempotent")
)

// TraceExecuteStart implements commands.Tracer: a span "pgdcb.command".
func (t *tracer) TraceExecuteStart(ctx context.Context, d commands.TraceExecuteData) context.Context {
	return t.start(ctx, "pgdcb.command", trace.SpanKindInternal, attrCommandType.String(d.Type))
}

// TraceExecuteEnd implements commands.Tracer. A rejection, a duplicate and
// giving up on conflicts are answers: their status stays unset.
func (t *tracer) TraceExecuteEnd(ctx context.Context, d commands.TraceExecuteData) {
	var err error
	if d.Result == commands.ResultError || d.Result == commands.ResultInvalid {
		err = d.Err
	}
	finish(ctx, err, attrCommandID.String(d.CommandID.String()), attrResult.String(string(d.Result)),
		attrAttempts.Int(d.Attempts), attrRetries.Int(d.Retries))
}

// TraceBatchStart implements subscription.Tracer: a span "pgdcb.batch" per
// batch of a subscription, projection or outbox relay.
func (t *tracer) TraceBatchStart(ctx context.Context, d subscription.TraceBatchData) context.Context {
	return t.start(ctx, "pgdcb.batch", trace.SpanKindConsumer, attrReader.String(d.Name),
		attrReaderKind.String(d.Kind), attrEvents.Int(d.Events))
}

// TraceBatchEnd implements subscription.Tracer.
func (t *tracer) TraceBatchEnd(ctx context.Context, d subscription.TraceBatchData) {
	finish(ctx, d.Err, attrCommitted.Bool(d.Committed))
}

// TraceDeliveryStart implements outbox.Tracer: a span "pgdcb.outbox.publish"
// per publish, a child of the relay's batch span.
func (t *tracer) TraceDeliveryStart(ctx context.Context, d outbox.TraceDeliveryData) context.Context {
	return t.start(ctx, "pgdcb.outbox.publish", trace.SpanKindProducer, attrRelay.String(d.Relay),
		attrTopic.String(d.Topic), attrMessages.Int(d.Messages))
}

// TraceDeliveryEnd implements outbox.Tracer.
func (t *tracer) TraceDeliveryEnd(ctx context.Context, d outbox.TraceDeliveryData) {
	finish(ctx, d.Err)
}

// TraceAttemptStart implements effects.Tracer: a span "pgdcb.effect.attempt"
// per attempt, the handler's context.
func (t *tracer) TraceAttemptStart(ctx context.Context, d effects.TraceAttemptData) context.Context {
	return t.start(ctx, "pgdcb.effect.attempt", trace.SpanKindInternal, attrEffectID.String(d.EffectID),
		attrEffectType.String(d.Type), attrSession.String(d.Session), attrAttempt.Int(d.Attempt),
		attrWorker.String(d.Worker), attrTakeover.Bool(d.Takeover))
}

// TraceAttemptEnd implements effects.Tracer: the handler's error, else the
// recording's, is the span's error.
func (t *tracer) TraceAttemptEnd(ctx context.Context, d effects.TraceAttemptData) {
	err := d.Err
	if err == nil {
		err = d.RecordErr
	}
	finish(ctx, err)
}

// TraceRunAppendStart implements runstore.Tracer: a span
// "pgdcb.runstore.append_event".
func (t *tracer) TraceRunAppendStart(ctx context.Context, d runstore.TraceData) context.Context {
	return t.start(ctx, "pgdcb.runstore.append_event", trace.SpanKindInternal, dbSystem,
		attrRunID.String(d.RunID), attrEventType.String(d.EventType))
}

// TraceRunAppendEnd implements runstore.Tracer.
func (t *tracer) TraceRunAppendEnd(ctx context.Context, d runstore.TraceData) {
	attrs := []attribute.KeyValue{attrRetries.Int(d.Retries)}
	if d.Err == nil {
		attrs = append(attrs, attrRunSeq.Int64(d.Result.RunSeq), attrIdempotent.Bool(d.Result.Idempotent))
	}
	finish(ctx, d.Err, attrs...)
}

// TraceRunFetchStart implements runstore.Tracer: a span
// "pgdcb.runstore.fetch_events".
func (t *tracer) TraceRunFetchStart(ctx context.Context, d runstore.TraceData) context.Context {
	return t.start(ctx, "pgdcb.runstore.fetch_events", trace.SpanKindInternal, dbSystem, attrRunID.String(d.RunID))
}

// TraceRunFetchEnd implements runstore.Tracer.
func (t *tracer) TraceRunFetchEnd(ctx context.Context, d runstore.TraceData) {
	finish(ctx, d.Err, attrEvents.Int(d.Events))
}
