// Package wake is the machinery shared by the tailing readers of this module
// (package subscription's Subscription, package projection's Runner and
// package effects' Worker): a Waker that tells a reader when to read again,
// a LagTracker that measures how far behind the head of the log it is, and a
// HorizonWait that chooses how long it waits while an open transaction holds
// the horizon back. It is internal so that users do not build on it; they
// get its results through the readers' Configs and Tracers.
package wake

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/retry"
)

// DefaultPoll is the poll interval of a Waker made with poll <= 0 (the
// readers' own default: subscription and projection Config.PollInterval).
const DefaultPoll = time.Second

// Waker tells a tailing reader when to read again: when the store reports an
// append (pgdcb.Store.Listen: a NOTIFY on the store's channel for the
// PostgreSQL store, a wake-up in memory for memstore), unless notifications
// are disabled, and in any case every poll interval, so polling alone is
// enough.
//
// When listening fails, the Waker listens again with capped exponential
// backoff; the store wakes the reader once each time it listens again, since
// notifications sent meanwhile were lost.
type Waker struct {
	store  pgdcb.Store
	poll   time.Duration
	notify bool
	log    *slog.Logger

	ch chan struct{}

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a Waker for the store. poll <= 0 means DefaultPoll; notify
// false means polling only (for example behind PgBouncer in transaction mode,
// where LISTEN cannot work). logger nil means quiet.
func New(store pgdcb.Store, poll time.Duration, notify bool, logger *slog.Logger) *Waker {
	if poll <= 0 {
		poll = DefaultPoll
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Waker{store: store, poll: poll, notify: notify, log: logger,
		ch: make(chan struct{}, 1)}
}

// Start begins listening (when notifications are on) until ctx ends or Stop
// is called. Later calls do nothing; Wait works without it (polling only).
func (w *Waker) Start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.notify || w.started {
		return
	}
	w.started = true
	ctx, w.cancel = context.WithCancel(ctx)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.listen(ctx)
	}()
}

// Stop ends the listener and returns once its goroutine and connection are
// gone. Call it when the reader is done (after Stop, Start does nothing).
func (w *Waker) Stop() {
	w.mu.Lock()
	w.started = true
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	w.wg.Wait()
}

// Wake makes the next (or a pending) Wait return at once.
func (w *Waker) Wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Wait returns when a notification arrived since the last Wait, when the poll
// interval has passed, or with ctx's error when ctx ends.
func (w *Waker) Wait(ctx context.Context) error {
	return w.WaitFor(ctx, w.poll)
}

// WaitFor is Wait with a timeout of its own instead of the poll interval.
func (w *Waker) WaitFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.ch:
		return nil
	case <-t.C:
		return nil
	}
}

func (w *Waker) listen(ctx context.Context) {
	var failures int
	for ctx.Err() == nil {
		listening := false
		err := w.store.Listen(ctx, func() {
			if !listening {
				listening, failures = true, 0
			}
			w.Wake()
		})
		if ctx.Err() != nil {
			return
		}
		failures++
		d := retry.Delay(failures, 50*time.Millisecond, 5*time.Second)
		w.log.WarnContext(ctx, "pgdcb: subscription: listen failed, reconnecting", "err", err, "retry_in", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}
