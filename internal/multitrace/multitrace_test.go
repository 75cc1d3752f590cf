package multitrace_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/multitrace"
)

type tracer interface {
	Start(ctx context.Context, d string) context.Context
}

type key struct{}

// named appends its name to the context's trail.
type named string

func (n named) Start(ctx context.Context, _ string) context.Context {
	prev, _ := ctx.Value(key{}).(string)
	return context.WithValue(ctx, key{}, prev+string(n))
}

// optional is a named that also implements an optional interface.
type optional struct{ named }

func (o optional) Extra(seen *[]string) { *seen = append(*seen, string(o.named)) }

// Nil tracers are dropped; Start chains the contexts in order; End reaches
// every tracer, Each only those implementing the optional interface.
func TestMultitrace(t *testing.T) {
	t.Parallel()
	ts := multitrace.NonNil([]tracer{named("a"), nil, optional{"b"}, named("c")})
	require.Len(t, ts, 3)
	ctx := multitrace.Start(ts, context.Background(), "d", tracer.Start)
	require.Equal(t, "abc", ctx.Value(key{}))
	var seen []string
	multitrace.Each(ts, func(o interface{ Extra(*[]string) }) { o.Extra(&seen) })
	require.Equal(t, []string{"b"}, seen)
	ends := 0
	multitrace.End(ts, ctx, "d", func(tracer, context.Context, string) { ends++ })
	require.Equal(t, 3, ends)
}
