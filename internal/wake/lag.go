package wake

import (
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
)

// Lag says how far a tailing reader is behind the head of the log. It has
// the fields of subscription.Lag, the public type that documents them, and
// converts to it: subscription.Lag(l).
type Lag struct {
	// Events is approximately how many events sort after the last delivered
	// one (the head's position minus that event's position); 0 when caught
	// up.
	Events int64
	// Behind is the age of the last delivered event while the reader is
	// behind the head; 0 when caught up (or before the first delivery).
	Behind time.Duration
	// HorizonHeld is how long the horizon (pgdcb.TailBatch.Horizon) has
	// stayed at the same transaction while the head was at or above it.
	HorizonHeld time.Duration
	// HorizonHolder is the transaction at the horizon while HorizonHeld is
	// not zero.
	HorizonHolder pgdcb.HorizonHolder
}

// LagTracker turns successive tail batches into Lag. Not safe for concurrent
// use; the zero value is ready.
type LagTracker struct {
	horizon uint64
	since   time.Time
	lastPos int64
	lastAt  time.Time
}

// Observe records a batch that was delivered (or was empty) at now.
func (t *LagTracker) Observe(b pgdcb.TailBatch, now time.Time) Lag {
	if n := len(b.Events); n > 0 {
		t.lastPos = b.Events[n-1].Position
		t.lastAt = b.Events[n-1].OccurredAt
	}
	var l Lag
	if !caughtUp(b.Cursor, b.Head) {
		if d := b.Head.Position - t.lastPos; d > 0 {
			l.Events = d
		}
		if !t.lastAt.IsZero() {
			l.Behind = max(0, now.Sub(t.lastAt))
		}
	}
	if b.Head.TransactionID >= b.Horizon && b.Horizon > 0 {
		if t.horizon != b.Horizon || t.since.IsZero() {
			t.horizon, t.since = b.Horizon, now
		}
		l.HorizonHeld = now.Sub(t.since)
		l.HorizonHolder = b.HorizonHolder
	} else {
		t.horizon, t.since = 0, time.Time{}
	}
	return l
}

// caughtUp: the cursor is at or after the head in log order.
func caughtUp(c, head cursor.Cursor) bool {
	if c.TransactionID != head.TransactionID {
		return c.TransactionID > head.TransactionID
	}
	return c.Position >= head.Position
}

// HorizonWait chooses how long a reader waits before reading again. When
// committed events sit at or above the horizon (an open transaction holds it
// back), they become readable as soon as that transaction ends, which may send
// no notification: the reader then retries after 2ms, doubling while the
// horizon stays put, up to the poll interval. Otherwise it waits the poll
// interval (or a notification). The zero value is ready.
type HorizonWait struct {
	horizon uint64
	d       time.Duration
}

// Next returns the wait after batch b.
func (h *HorizonWait) Next(b pgdcb.TailBatch, poll time.Duration) time.Duration {
	if b.Horizon == 0 || b.Head.TransactionID < b.Horizon {
		h.horizon, h.d = 0, 0
		return poll
	}
	if h.horizon != b.Horizon || h.d == 0 {
		h.horizon, h.d = b.Horizon, 2*time.Millisecond
	} else {
		h.d *= 2
	}
	return min(h.d, poll)
}
