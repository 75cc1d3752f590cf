package effects

import (
	"sync/atomic"
	"time"
)

// backlog is what a worker knew of the unfinished effects at its last look
// at the log. Written by Run's goroutine, read by Backlog.
type backlog struct {
	unfinished atomic.Int64
	oldest     atomic.Int64 // RequestedAt of the oldest unfinished effect, Unix ns; 0: none
}

// observeBacklog records the index's unfinished effects (the worker's index keeps
// only those).
func (w *Worker) observeBacklog() {
	var oldest time.Time
	for _, e := range w.index.byID {
		if oldest.IsZero() || e.RequestedAt.Before(oldest) {
			oldest = e.RequestedAt
		}
	}
	w.backlog.unfinished.Store(int64(len(w.index.byID)))
	if oldest.IsZero() {
		w.backlog.oldest.Store(0)
	} else {
		w.backlog.oldest.Store(oldest.UnixNano())
	}
}

// Backlog is what a worker knew of the unfinished effects (pending or
// executing, of any type) at its last look at the log. Every worker of a
// store sees the same effects.
type Backlog struct {
	Unfinished int64
	// OldestRequestedAt is when the oldest unfinished effect was requested;
	// zero when none.
	OldestRequestedAt time.Time
}

// Backlog returns the unfinished effects the worker knew of at its last look
// at the log (pgdcbprom.Metrics.WatchEffects exports it). Safe to call while
// Run runs.
func (w *Worker) Backlog() Backlog {
	b := Backlog{Unfinished: w.backlog.unfinished.Load()}
	if at := w.backlog.oldest.Load(); at != 0 {
		b.OldestRequestedAt = time.Unix(0, at)
	}
	return b
}
