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
	TraceRunAppendStart(ctx context.Context, data TraceData) context.Context
	// TraceRunAppendEnd is called when AppendEvent returns.
	TraceRunAppendEnd(ctx context.Context, data TraceData)
	// TraceRunFetchStart is called when FetchEvents starts.
	TraceRunFetchStart(ctx context.Context, data TraceData) context.Context
	// TraceRunFetchEnd is called when FetchEvents returns.
	TraceRunFetchEnd(ctx context.Context, data TraceData)
}

// TraceData is what a Tracer receives. The Start methods get RunID and the
// call's input (EventType, or Opts); the End methods get that and the
// outcome.
type TraceData struct {
	RunID string
	// EventType is AppendEvent's event's type.
	EventType string
	// Opts are FetchEvents' options as given (zero for nil).
	Opts FetchOptions
	// Result is AppendEvent's result (zero when Err is set).
	Result AppendResult
	// Retries is how many of AppendEvent's attempts lost the race for the
	// run's next runSeq (or had a stale hint, or an unknown outcome) and
	// were made again.
	Retries int
	// Events is how many events FetchEvents returned.
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
