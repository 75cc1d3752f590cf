package projection

import (
	"context"
	"errors"
	"time"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/subscription"
)

// tracing is the runner's Config.Tracer with its StatusTracer found once;
// its methods do nothing for a nil Tracer.
type tracing struct {
	t subscription.Tracer
	s subscription.StatusTracer
}

func newTracing(t subscription.Tracer) tracing {
	s, _ := t.(subscription.StatusTracer)
	return tracing{t: t, s: s}
}

// batchTrace is a traced batch in flight: the context TraceBatchStart
// returned and when it started.
type batchTrace struct {
	ctx   context.Context
	start time.Time
}

// start traces a batch of res.n events read after cur, returning the
// context the batch's handler and commit run under. Empty batches are not
// traced.
func (tr tracing) start(ctx context.Context, name string, res *batchResult, after cursor.Cursor) context.Context {
	if tr.t == nil || res.n == 0 {
		return ctx
	}
	ctx = tr.t.TraceBatchStart(ctx, subscription.TraceBatchData{Name: name, Kind: subscription.KindProjection,
		Events: res.n, After: after})
	res.trace = &batchTrace{ctx: ctx, start: time.Now()}
	return ctx
}

// end ends the batch start traced, if any. A fenced batch rolled back
// without an error of its own.
func (tr tracing) end(name string, res batchResult, err error) {
	if res.trace == nil {
		return
	}
	if errors.Is(err, errFenced) {
		err = nil
	}
	tr.t.TraceBatchEnd(res.trace.ctx, subscription.TraceBatchData{Name: name, Kind: subscription.KindProjection,
		Events: res.n, Committed: res.wrote, Duration: time.Since(res.trace.start), Err: err})
}

func (tr tracing) readerError(ctx context.Context, name string, err error) {
	if tr.s != nil {
		tr.s.TraceReaderError(ctx, name, err)
	}
}

func (tr tracing) lag(ctx context.Context, name string, l subscription.Lag) {
	if tr.s != nil {
		tr.s.TraceLag(ctx, name, l)
	}
}

func (tr tracing) leader(ctx context.Context, name string, leading bool) {
	if tr.s != nil {
		tr.s.TraceLeader(ctx, name, leading)
	}
}

func (tr tracing) failed(ctx context.Context, name string, failed bool) {
	if tr.s != nil {
		tr.s.TraceFailed(ctx, name, failed)
	}
}
