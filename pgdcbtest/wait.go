package pgdcbtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/subscription"
)

// WaitTimeout bounds every wait of this package (or the test's deadline,
// when that is sooner).
const waitTimeout = 30 * time.Second

// pollEvery is how often WaitFor asks where a reader is.
const pollEvery = 5 * time.Millisecond

// CursorOf is the cursor just after an append: a reader that has reached it
// has delivered the append's events and everything before them.
// It is res.Cursor().
func CursorOf(res pgdcb.AppendResult) cursor.Cursor { return res.Cursor() }

// CaughtUp reports whether a tailing reader whose cursor is at has
// delivered every event up to target: target can be CursorOf an append, a
// decision cursor (Head, ReadAll, Project) or another tailing cursor.
func CaughtUp(at, target cursor.Cursor) bool {
	return cursor.Compare(at.TransactionID, at.Position, target.TransactionID, target.Position) >= 0
}

// WaitFor calls at until the cursor it returns has caught up with target
// (see CaughtUp). It fails the test when at returns an error, or after
// WaitTimeout (or at the test's deadline), naming where the reader was.
// Tailing readers stop at the oldest open transaction of the store's
// database, so another test's long transaction delays them: WaitFor waits,
// never skips.
func WaitFor(tb testing.TB, target cursor.Cursor, at func(ctx context.Context) (cursor.Cursor, error)) {
	tb.Helper()
	ctx, cancel := waitContext(tb)
	defer cancel()
	var last cursor.Cursor
	for {
		c, err := at(ctx)
		if err != nil && ctx.Err() == nil {
			tb.Fatalf("pgdcbtest: waiting for %s: %v", target, err)
		}
		if err == nil {
			if CaughtUp(c, target) {
				return
			}
			last = c
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("pgdcbtest: waiting for %s: still at %s after %s: %v", target, last, waitTimeout, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

func waitContext(tb testing.TB) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(tb.Context(), waitTimeout)
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := t.Deadline(); ok {
			ctx2, cancel2 := context.WithDeadline(ctx, d.Add(-time.Second))
			return ctx2, func() { cancel2(); cancel() }
		}
	}
	return ctx, cancel
}

// WaitForProjection waits until the projection's checkpoint has caught up
// with target, with projection.Runner.WaitFor. It fails the test at once
// when the projection is PAUSED or FAILED (with its last error), or after
// WaitTimeout (or at the test's deadline). The projection must be running
// (Run) in the test.
func WaitForProjection(tb testing.TB, r *projection.Runner, target cursor.Cursor) {
	tb.Helper()
	ctx, cancel := waitContext(tb)
	defer cancel()
	if err := r.WaitFor(ctx, target); err != nil {
		tb.Fatalf("pgdcbtest: projection %s: %v", r.Name(), err)
	}
}

// WaitForSubscription waits until the subscription has handled every
// matching event up to target, with subscription.Subscription.WaitFor. It
// fails the test when Run returns first, or after WaitTimeout (or at the
// test's deadline). The subscription must be running (Run) in the test.
func WaitForSubscription(tb testing.TB, s *subscription.Subscription, target cursor.Cursor) {
	tb.Helper()
	ctx, cancel := waitContext(tb)
	defer cancel()
	if err := s.WaitFor(ctx, target); err != nil {
		tb.Fatalf("pgdcbtest: subscription: %v", err)
	}
}

// Progress follows a subscription's handler: Track wraps the handler, and
// WaitFor waits until the handler has returned from the batches up to a
// cursor. The zero Progress is ready to use; it is safe for concurrent use.
type Progress struct {
	mu  sync.Mutex
	cur cursor.Cursor
}

// Track returns a handler that calls h and, when h succeeds, records the
// batch's cursor.
func (p *Progress) Track(h subscription.Handler) subscription.Handler {
	return func(ctx context.Context, b subscription.Batch) error {
		if err := h(ctx, b); err != nil {
			return err
		}
		p.mu.Lock()
		p.cur = b.Cursor
		p.mu.Unlock()
		return nil
	}
}

// Cursor is the cursor of the last batch handled without error.
func (p *Progress) Cursor() cursor.Cursor {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// WaitFor waits until the tracked handler has handled every event up to
// target (see the package function WaitFor).
func (p *Progress) WaitFor(tb testing.TB, target cursor.Cursor) {
	tb.Helper()
	WaitFor(tb, target, func(context.Context) (cursor.Cursor, error) { return p.Cursor(), nil })
}
