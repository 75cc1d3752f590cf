package pgdcbotel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/pgdcbotel"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/subscription"
)

// wait bounds each wait for observable state on the shared, loaded machine.
const wait = time.Minute

// ended returns the ended spans named name.
func ended(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// spanName is the name of the span in ctx ("" when none).
func spanName(ctx context.Context) string {
	if s, ok := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan); ok {
		return s.Name()
	}
	return ""
}

// One Tracer set in every component's Config makes a span of a command, a
// subscription's and a projection's batch, an outbox relay's batch and
// publish, an effect attempt, and runstore's AppendEvent and FetchEvents,
// each a child of the span of the context it ran under (the store's own
// spans beneath them).
func TestSpansOfEveryComponent(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := pgdcbotel.New(&pgdcbotel.Config{TracerProvider: tp})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	es := pgdcbtest.NewStore(t, &pgdcbtest.Options{Config: &eventstore.Config{Tracer: tr}, OwnPool: true})
	pool := es.Pool()
	q := query.Tagged([]string{"Opened"})

	// A command, and its append beneath it.
	ex, err := commands.New(es, &commands.Config{Tracer: tr})
	require.NoError(t, err)
	out, err := ex.Execute(ctx, commands.Command{Type: "Open", Handler: commands.HandlerFunc(
		func(context.Context, *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
			return []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "account=a")}, appendif.Condition{}, nil
		})})
	require.NoError(t, err)
	cmd := ended(rec, "pgdcb.command")
	require.Len(t, cmd, 1)
	require.Equal(t, "executed", attrs(cmd[0])[attribute.Key("pgdcb.result")].AsString())
	require.Equal(t, "Open", attrs(cmd[0])[attribute.Key("pgdcb.command.type")].AsString())
	appends := ended(rec, "pgdcb.append")
	require.NotEmpty(t, appends)
	require.Equal(t, cmd[0].SpanContext().SpanID(), appends[len(appends)-1].Parent().SpanID(), "the append is the command's child")
	head := cursor.Cursor{TransactionID: out.Events[0].TransactionID, Position: out.Events[0].Position}

	// A subscription's batch: its handler runs under the batch's span.
	sub, err := subscription.New(es, q, &subscription.Config{Name: "sub", Tracer: tr, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	sctx, scancel := context.WithCancel(ctx)
	var inSpan atomic.Bool
	err = sub.Run(sctx, cursor.Start, func(ctx context.Context, b subscription.Batch) error {
		inSpan.Store(spanName(ctx) == "pgdcb.batch")
		scancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, inSpan.Load(), "the handler's context carries the batch's span")

	// A projection's batch, and an outbox relay's with its publish beneath.
	proj, err := projection.New(es, "proj", q, func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error { return nil },
		&projection.Config{ReaderConfig: projection.ReaderConfig{Tracer: tr, PollInterval: 20 * time.Millisecond, ElectionInterval: 50 * time.Millisecond}})
	require.NoError(t, err)
	var published atomic.Int32
	relay, err := outbox.New(es, outbox.Topic{Name: "accounts", Query: q}, "mem",
		outbox.PublisherFunc(func(context.Context, []outbox.Message) error { published.Add(1); return nil }),
		&outbox.Config{DeliveryTracer: tr,
			ReaderConfig: projection.ReaderConfig{Tracer: tr, PollInterval: 20 * time.Millisecond, ElectionInterval: 50 * time.Millisecond}})
	require.NoError(t, err)
	done := make(chan error, 2)
	go func() { done <- proj.Run(ctx) }()
	go func() { done <- relay.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	require.NoError(t, proj.WaitFor(wctx, head))
	require.Eventually(t, func() bool { return len(ended(rec, "pgdcb.outbox.publish")) > 0 }, wait, 5*time.Millisecond)

	// An effect attempt.
	fq, err := effects.New(es, nil)
	require.NoError(t, err)
	_, _, err = fq.Request(ctx, effects.Request{Type: "mail", Session: "s", DedupeKey: "k"})
	require.NoError(t, err)
	w, err := effects.NewWorker(es, &effects.Config{Tracer: tr, PollInterval: 20 * time.Millisecond,
		Handlers: map[string]effects.Handler{"mail": func(context.Context, effects.Effect) error { return nil }}})
	require.NoError(t, err)
	go func() { done <- w.Run(ctx) }()
	require.Eventually(t, func() bool { return len(ended(rec, "pgdcb.effect.attempt")) > 0 }, wait, 5*time.Millisecond)

	// runstore's AppendEvent and FetchEvents.
	_, err = runstore.Migrate(ctx, pool, es.Schema())
	require.NoError(t, err)
	rs, err := runstore.New(es, &runstore.Config{Tracer: tr})
	require.NoError(t, err)
	_, err = rs.AppendEvent(ctx, runstore.CanonicalEngineEvent{RunID: "run-1", EventType: "RunStarted",
		IdempotencyKey: "k1", EmittedAt: "2026-11-24T10:00:00Z", EventData: []byte(`{}`)})
	require.NoError(t, err)
	evs, err := rs.FetchEvents(ctx, "run-1", nil)
	require.NoError(t, err)
	require.Len(t, evs, 1)

	cancel()
	for range 3 {
		<-done
	}

	batches := map[string]int{}
	for _, s := range ended(rec, "pgdcb.batch") {
		a := attrs(s)
		batches[a[attribute.Key("pgdcb.reader.kind")].AsString()+" "+a[attribute.Key("pgdcb.reader")].AsString()]++
	}
	require.Positive(t, batches["subscription sub"], batches)
	require.Positive(t, batches["projection proj"], batches)
	require.Positive(t, batches["projection "+relay.Name()], batches)
	pub := ended(rec, "pgdcb.outbox.publish")[0]
	require.Equal(t, "accounts", attrs(pub)[attribute.Key("pgdcb.topic")].AsString())
	parents := map[string]bool{}
	for _, s := range ended(rec, "pgdcb.batch") {
		parents[s.SpanContext().SpanID().String()] = true
	}
	require.True(t, parents[pub.Parent().SpanID().String()], "the publish is a batch's child")
	att := ended(rec, "pgdcb.effect.attempt")[0]
	require.Equal(t, "mail", attrs(att)[attribute.Key("pgdcb.effect.type")].AsString())
	require.Equal(t, codes.Unset, att.Status().Code)
	ra := ended(rec, "pgdcb.runstore.append_event")
	require.Len(t, ra, 1)
	require.EqualValues(t, 1, attrs(ra[0])[attribute.Key("pgdcb.run_seq")].AsInt64())
	rf := ended(rec, "pgdcb.runstore.fetch_events")
	require.Len(t, rf, 1)
	require.EqualValues(t, 1, attrs(rf[0])[attribute.Key("pgdcb.events")].AsInt64())
	require.Empty(t, rec.Started()[len(rec.Ended()):], "every span ended")
}
