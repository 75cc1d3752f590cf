package pgdcbotel_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/pgdcbotel"
	"github.com/pgdcb/pgdcb/subscription"
)

func ExampleNew() {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	tracer := pgdcbotel.New(&pgdcbotel.Config{TracerProvider: provider})
	// store, err := eventstore.New(pool, &eventstore.Config{Tracer: tracer})
	// Here, what the store reports when an AppendIf finds its condition failed:
	ctx := tracer.TraceAppendStart(context.Background(), eventstore.TraceAppendStartData{})
	tracer.TraceAppendEnd(ctx, eventstore.TraceAppendEndData{Outcome: eventstore.OutcomeConditionFailed})

	span := recorder.Ended()[0]
	for _, kv := range span.Attributes() {
		if kv.Key == attribute.Key("pgdcb.outcome") {
			fmt.Println(span.Name(), kv.Value.AsString(), span.Status().Code)
		}
	}
	// Output:
	// pgdcb.append condition_failed Unset
}

// One Tracer serves every component: here what a projection reports around
// a batch of three events it committed.
func ExampleTracer_TraceBatchStart() {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	tracer := pgdcbotel.New(&pgdcbotel.Config{TracerProvider: provider})
	// proj, err := projection.New(store, "balances", q, h, &projection.Config{Tracer: tracer})
	ctx := tracer.TraceBatchStart(context.Background(), subscription.TraceBatchData{
		Name: "balances", Kind: subscription.KindProjection, Events: 3})
	tracer.TraceBatchEnd(ctx, subscription.TraceBatchData{Name: "balances", Kind: subscription.KindProjection,
		Events: 3, Committed: true})

	span := recorder.Ended()[0]
	fmt.Println(span.Name(), span.SpanKind(), span.Status().Code)
	// Output:
	// pgdcb.batch consumer Unset
}
