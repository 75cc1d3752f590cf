package pgdcbotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/tracescenario"
	"github.com/pgdcb/pgdcb/pgdcbotel"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// A real append, conflict, idempotent refusal, invalid append and the reads
// each end one span, a child of the caller's, with its outcome; only the
// invalid append's status is Error.
func TestSpansOfARealStore(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := tracescenario.Store(t, pgdcbotel.New(&pgdcbotel.Config{TracerProvider: tp}))

	tracescenario.Run(t, s)
	require.Empty(t, rec.Started()[len(rec.Ended()):], "every span ended")

	outcomes := map[string]int{}
	for _, sp := range rec.Ended() {
		a := attrs(sp)
		require.Equal(t, "github.com/pgdcb/pgdcb/pgdcbotel", sp.InstrumentationScope().Name)
		require.Equal(t, "postgresql", a["db.system.name"].AsString())
		o := a[attribute.Key("pgdcb.outcome")].AsString()
		outcomes[sp.Name()+" "+o]++
		switch o {
		case "invalid":
			require.Equal(t, codes.Error, sp.Status().Code, sp.Name())
			require.Len(t, sp.Events(), 1, "the error is recorded")
		default:
			require.Equal(t, codes.Unset, sp.Status().Code, sp.Name()+" "+o)
		}
		switch sp.Name() + " " + o {
		case "pgdcb.append condition_failed":
			require.True(t, a[attribute.Key("pgdcb.conditional")].AsBool())
			require.False(t, a[attribute.Key("pgdcb.idempotency")].AsBool())
			require.EqualValues(t, 1, a[attribute.Key("pgdcb.check_items")].AsInt64())
		case "pgdcb.append idempotent":
			require.True(t, a[attribute.Key("pgdcb.idempotency")].AsBool())
			require.EqualValues(t, 2, a[attribute.Key("pgdcb.check_items")].AsInt64())
		case "pgdcb.append committed", "pgdcb.append invalid":
			_, ok := a[attribute.Key("pgdcb.check_items")]
			require.False(t, ok, "no checks: no check_items")
		case "pgdcb.project ok":
			require.EqualValues(t, tracescenario.ProjectEvents, a[attribute.Key("pgdcb.events")].AsInt64())
			require.Contains(t, a[attribute.Key("pgdcb.query")].AsString(), "course=c1")
		case "pgdcb.read ok":
			require.EqualValues(t, tracescenario.ReadEvents, a[attribute.Key("pgdcb.events")].AsInt64())
		}
	}
	require.Equal(t, map[string]int{
		"pgdcb.append committed":        tracescenario.Committed,
		"pgdcb.append condition_failed": tracescenario.ConditionFailed,
		"pgdcb.append idempotent":       tracescenario.Idempotent,
		"pgdcb.append invalid":          tracescenario.Invalid,
		"pgdcb.project ok":              1,
		"pgdcb.head ok":                 1,
		"pgdcb.read ok":                 1,
	}, outcomes)

	// A span in the caller's context is the parent.
	rec2 := tracetest.NewSpanRecorder()
	tp.RegisterSpanProcessor(rec2)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	_, err := s.Head(ctx)
	require.NoError(t, err)
	parent.End()
	ended := rec2.Ended()
	require.Len(t, ended, 2)
	require.Equal(t, "pgdcb.head", ended[0].Name())
	require.Equal(t, parent.SpanContext().SpanID(), ended[0].Parent().SpanID())
}
