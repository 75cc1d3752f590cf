package eventstore

import (
	"context"
	"sync"
)

// bgWork tracks what Close waits for: appends on the pool in flight, and the
// store's goroutines (notifications, decision-snapshot writes, group
// senders).
type bgWork struct {
	mu      sync.Mutex
	closing bool          // Close began: no new appends, no new snapshot writes
	active  int           // appends in flight and goroutines running
	idle    chan struct{} // made by Close, closed when active reaches 0 while closing
	cancels map[int64]context.CancelFunc
	next    int64
	stopped bool // Close's context ended: background work is cancelled
}

// enter counts a call or goroutine in. Once Close began, strict work
// (appends, snapshot writes) is refused; other work (the notification and
// the group sender of an append in flight) is refused only once nothing is
// left running.
func (b *bgWork) enter(strict bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing && (strict || b.active == 0) {
		return false
	}
	b.active++
	return true
}

func (b *bgWork) leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active--
	if b.active == 0 && b.closing {
		close(b.idle)
	}
}

// run runs f in a goroutine Close waits for, with a context that has
// parent's values but not its cancellation, and that Close cancels when its
// own context ends. It reports false (and runs nothing) when the store is
// closed.
func (b *bgWork) run(parent context.Context, strict bool, f func(ctx context.Context)) bool {
	if !b.enter(strict) {
		return false
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	b.mu.Lock()
	if b.stopped {
		cancel()
	}
	if b.cancels == nil {
		b.cancels = make(map[int64]context.CancelFunc)
	}
	id := b.next
	b.next++
	b.cancels[id] = cancel
	b.mu.Unlock()
	go func() {
		defer b.leave()
		defer func() {
			b.mu.Lock()
			delete(b.cancels, id)
			b.mu.Unlock()
			cancel()
		}()
		f(ctx)
	}()
	return true
}

// Close stops the store: Append and AppendIf on the pool fail with pgdcb.ErrClosed
// from then on, and no new background work starts. It waits until the
// appends in flight have returned and the store's goroutines (notifications
// after appends, decision-snapshot writes, group-commit senders) have ended,
// or until ctx ends: it then cancels the background work (which ends
// promptly; an append in flight ends with its own context) and returns
// ctx's error. Close the pool after Close, so that the last notification
// and snapshot writes are not lost to a closed pool. Reads and the …Tx calls
// are unaffected (they use the pool or the caller's transaction directly;
// Close closes the store's pool of key look-ups, Config.KEK, and reads then
// look keys up on the store's pool). Calling Close again waits again.
func (s *Store) Close(ctx context.Context) error {
	defer s.keys.close()
	b := &s.bg
	b.mu.Lock()
	if !b.closing {
		b.closing = true
		b.idle = make(chan struct{})
		if b.active == 0 {
			close(b.idle)
		}
	}
	idle := b.idle
	b.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	b.stopped = true
	for _, cancel := range b.cancels {
		cancel()
	}
	b.mu.Unlock()
	return ctx.Err()
}
