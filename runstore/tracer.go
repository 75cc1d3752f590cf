package runstore

import (
	"context"
	"time"

	"github.com/pgdcb/pgdcb/internal/multitrace"
)

// Tracer observes the store's AppendEvent and FetchEvents calls, in the
// style of eventstore.Tracer: each Start method may return a derived context
// (carrying a span, say) that the call runs under and that the matching End
// method receives. Set it in Config.Tracer; nil (the default) costs nothing.
//
// A Tracer that also implements ProjectorTracer receives what the snapshot
// projector does, found by type assertion as pgx finds its optional
// tracers. Package pgdcbprom turns the calls into Prometheus metrics
// (pgdcbprom.New, pgdcb_runstore_…) and package pgdcbotel
// into OpenTelemetry spans; MultiTracer combines tracers. A Tracer must not
// call the store.
type Tracer interface {
	// TraceRunAppendStart is called when AppendEvent starts, before the
	// event is checked.
	TraceRunAppendStart(ctx context.Context, data TraceRunAppendStartData) context.Context
	// TraceRunAppendEnd is called when AppendEvent returns.
	TraceRunAppendEnd(ctx context.Context, data TraceRunAppendEndData)
	// TraceRunFetchStart is called when FetchEvents starts.
	TraceRunFetchStart(ctx context.Context, data TraceRunFetchStartData) context.Context
	// TraceRunFetchEnd is called when FetchEvents returns.
	TraceRunFetchEnd(ctx context.Context, data TraceRunFetchEndData)
}

// TraceRunAppendStartData is what TraceRunAppendStart receives.
type TraceRunAppendStartData struct {
	RunID     string
	EventType string
}

// TraceRunAppendEndData is what TraceRunAppendEnd receives.
type TraceRunAppendEndData struct {
	RunID     string
	EventType string
	Result    AppendResult // zero when Err is set
	// Retries is how many attempts lost the race for the run's next runSeq
	// (or had a stale hint, or an unknown outcome) and were made again.
	Retries  int
	Duration time.Duration
	Err      error
}

// TraceRunFetchStartData is what TraceRunFetchStart receives.
type TraceRunFetchStartData struct {
	RunID string
	Opts  FetchOptions // as given (zero for nil)
}

// TraceRunFetchEndData is what TraceRunFetchEnd receives.
type TraceRunFetchEndData struct {
	RunID    string
	Events   int
	Duration time.Duration
	Err      error
}

// ProjectorTracer is an optional interface of a Tracer: what the snapshot
// projector does.
type ProjectorTracer interface {
	// TraceProjected is called after each projector batch with the run
	// events it read below the horizon, and after each read beyond a held
	// horizon (ahead true) with the run events read there.
	TraceProjected(ctx context.Context, events int, ahead bool)
	// TraceResync is called for each run whose snapshot was rebuilt after it
	// was marked STALE, with the trigger (gap, fill or lag).
	TraceResync(ctx context.Context, runID, trigger string)
	// TraceSnapshotLag is called with each measure of the projector's lag
	// (SnapshotLag, and the projector's own, about once a second).
	TraceSnapshotLag(ctx context.Context, lag Lag)
}

// MultiTracer returns a Tracer calling each non-nil tracer in turn, each
// Start on the context the previous one returned; it passes ProjectorTracer
// calls to those that implement it.
func MultiTracer(tracers ...Tracer) Tracer { return multiTracer(multitrace.NonNil(tracers)) }

type multiTracer []Tracer

var _ ProjectorTracer = multiTracer(nil)

func (m multiTracer) TraceRunAppendStart(ctx context.Context, d TraceRunAppendStartData) context.Context {
	return multitrace.Start(m, ctx, d, Tracer.TraceRunAppendStart)
}

func (m multiTracer) TraceRunAppendEnd(ctx context.Context, d TraceRunAppendEndData) {
	multitrace.End(m, ctx, d, Tracer.TraceRunAppendEnd)
}

func (m multiTracer) TraceRunFetchStart(ctx context.Context, d TraceRunFetchStartData) context.Context {
	return multitrace.Start(m, ctx, d, Tracer.TraceRunFetchStart)
}

func (m multiTracer) TraceRunFetchEnd(ctx context.Context, d TraceRunFetchEndData) {
	multitrace.End(m, ctx, d, Tracer.TraceRunFetchEnd)
}

func (m multiTracer) TraceProjected(ctx context.Context, events int, ahead bool) {
	multitrace.Each(m, func(p ProjectorTracer) { p.TraceProjected(ctx, events, ahead) })
}

func (m multiTracer) TraceResync(ctx context.Context, runID, trigger string) {
	multitrace.Each(m, func(p ProjectorTracer) { p.TraceResync(ctx, runID, trigger) })
}

func (m multiTracer) TraceSnapshotLag(ctx context.Context, lag Lag) {
	multitrace.Each(m, func(p ProjectorTracer) { p.TraceSnapshotLag(ctx, lag) })
}

// projectorTracer is the Config.Tracer's ProjectorTracer, or nil.
func (s *Store) projectorTracer() ProjectorTracer {
	p, _ := s.cfg.Tracer.(ProjectorTracer)
	return p
}
