package subscription

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// ErrNotRunning: WaitFor was waiting (or was called) after Run returned; the
// events will not be handled until Run is called again.
var ErrNotRunning = errors.New("pgdcb: subscription: not running")

// progress is where Run is: the cursor up to which every matching event was
// handled, shared with WaitFor.
type progress struct {
	mu      sync.Mutex
	cur     cursor.Cursor
	running bool
	ended   error         // why the last Run returned (nil while running or before the first)
	changed chan struct{} // closed and replaced at every change
}

func (p *progress) update(f func()) {
	p.mu.Lock()
	f()
	if p.changed != nil {
		close(p.changed)
	}
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *progress) start(from cursor.Cursor) {
	p.update(func() { p.cur, p.running, p.ended = from, true, nil })
}

func (p *progress) advance(c cursor.Cursor) { p.update(func() { p.cur = c }) }

func (p *progress) stop(err error) { p.update(func() { p.running, p.ended = false, err }) }

// Processed returns the cursor up to which the subscription has handled
// every matching event (the starting cursor of Run before the first batch):
// a batch's Cursor once its handler returned without error, or the cursor of
// a read that found no new matching event. ok is false before Run started.
func (s *Subscription) Processed() (c cursor.Cursor, ok bool) {
	s.prog.mu.Lock()
	defer s.prog.mu.Unlock()
	return s.prog.cur, s.prog.running || s.prog.ended != nil
}

// WaitFor waits until the running subscription has handled every matching
// event up to target — typically the cursor of an append
// (pgdcb.AppendResult.Cursor) — so that what the handler maintains
// reflects that append: read-your-writes for a read model fed by the
// subscription. target may also be a decision cursor (Head, ReadAll) or a
// tailing cursor; only its log point counts.
//
// It returns nil as soon as the subscription's cursor is at or after target
// (at once if it already is), ctx's error when ctx ends first (give ctx a
// deadline: an open transaction of the store's database delays the
// subscription, see docs/SUBSCRIPTIONS.md), and an error matching
// ErrNotRunning when Run returns (a failed handler, or its ctx ended) before
// target was reached. Called before Run starts, it waits for Run. It needs no
// server round trip: Run signals each step. Safe for concurrent use.
func (s *Subscription) WaitFor(ctx context.Context, target cursor.Cursor) error {
	for {
		s.prog.mu.Lock()
		if s.prog.changed == nil {
			s.prog.changed = make(chan struct{})
		}
		cur, running, ended, changed := s.prog.cur, s.prog.running, s.prog.ended, s.prog.changed
		s.prog.mu.Unlock()
		if (running || ended != nil) && cursor.Compare(cur.TransactionID, cur.Position, target.TransactionID, target.Position) >= 0 {
			return nil
		}
		if !running && ended != nil {
			return fmt.Errorf("%w (at %s, waiting for %s): %w", ErrNotRunning, cur, target, ended)
		}
		select {
		case <-ctx.Done():
			return errfmt.Errorf("pgdcb: subscription: waiting for %s (at %s): %w", target, cur, ctx.Err())
		case <-changed:
		}
	}
}
