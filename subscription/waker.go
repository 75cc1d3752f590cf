package subscription

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/retry"
)

// Waker tells a tailing reader when to read again: on a NOTIFY that an append
// sent on the store's channel (unless notifications are disabled), and in any
// case every poll interval, so polling alone is enough.
//
// The LISTEN runs on a dedicated connection (not from the pool: a pooled
// connection would carry the LISTEN to its next user). When it fails, the
// Waker reconnects with capped exponential backoff and wakes the reader once
// after each reconnect, since notifications sent meanwhile were lost.
type Waker struct {
	store  *eventstore.Store
	poll   time.Duration
	notify bool
	log    *slog.Logger

	ch chan struct{}

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewWaker returns a Waker for the store. poll <= 0 means DefaultPollInterval;
// notify false means polling only (for example behind PgBouncer in
// transaction mode, where LISTEN cannot work). logger nil means quiet.
func NewWaker(store *eventstore.Store, poll time.Duration, notify bool, logger *slog.Logger) *Waker {
	if poll <= 0 {
		poll = DefaultPollInterval
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
	channel := pgx.Identifier{eventstore.NotifyChannel(w.store.Schema())}.Sanitize()
	var failures int
	for ctx.Err() == nil {
		err := w.listenOnce(ctx, channel, &failures)
		if ctx.Err() != nil {
			return
		}
		failures++
		d := retry.Delay(failures, 50*time.Millisecond, 5*time.Second)
		w.log.Debug("pgdcb: subscription: listen failed, reconnecting", "error", err, "retry_in", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

func (w *Waker) listenOnce(ctx context.Context, channel string, failures *int) error {
	cfg := w.store.Pool().Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	*failures = 0
	w.Wake() // notifications may have been lost while we were not listening
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		w.Wake()
	}
}
