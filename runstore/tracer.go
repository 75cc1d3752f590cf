package runstore

import (
	"context"
	"time"
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
// into OpenTelemetry spans. A Tracer must not call the store.
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

// projectorTracer is the Config.Tracer's ProjectorTracer, or nil.
func (s *Store) projectorTracer() ProjectorTracer {
	p, _ := s.cfg.Tracer.(ProjectorTracer)
	return p
}
