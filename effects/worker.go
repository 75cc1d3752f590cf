package effects

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/internal/wake"
)

// recordTimeout bounds the recording of an attempt's result after the
// handler returned (also when the worker is stopping).
const recordTimeout = 10 * time.Second

// sameSessionRuns is the most effects of one session a worker runs in a row
// before it looks at the other sessions again.
const sameSessionRuns = 16

// Worker claims and executes effects. Run one or more per process; each
// needs its own Identity (the default is unique).
type Worker struct {
	store   *eventstore.Store
	cfg     Config
	stats   stats
	backlog backlog // for Backlog (backlog.go)

	// Owned by Run's goroutine.
	index *effects
	after cursor.Cursor
}

// NewWorker returns a worker over the store; cfg.Handlers must name at least
// one effect type.
func NewWorker(store *eventstore.Store, cfg *Config) (*Worker, error) {
	if store == nil {
		return nil, invalid("store", "must not be nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("effects.NewWorker: %w", err)
	}
	if cfg == nil || len(cfg.Handlers) == 0 {
		return nil, invalid("Config.Handlers", "must register at least one handler")
	}
	for t, h := range cfg.Handlers {
		if t == "" || h == nil {
			return nil, invalid("Config.Handlers", fmt.Sprintf("empty type or nil handler (type %q)", t))
		}
	}
	c := cfg.withDefaults()
	return &Worker{store: store, cfg: c}, nil
}

// Identity returns the worker's identity (Config.Identity), as recorded in
// effect_started.
func (w *Worker) Identity() string { return w.cfg.Identity }

// Run executes effects until ctx ends, then returns ctx's error. It follows
// the effect events with reads after its last cursor (woken by the store's
// notifications, polling every Config.PollInterval), claims the first
// unfinished effect of a session when it is due, runs its handler and
// records the result; one effect at a time. Store failures are logged and
// retried with backoff.
//
// When ctx ends while a handler runs, the handler's context ends too; a
// success is still recorded, a failure is not (the lease then expires and
// another worker makes the next attempt), as if the worker had died.
func (w *Worker) Run(ctx context.Context) error {
	waker := wake.New(w.store, w.cfg.PollInterval, !w.store.Config().NotifyDisabled, w.cfg.Logger)
	waker.Start(ctx)
	defer waker.Stop()
	w.index = newEffects()
	w.index.dropFinished = true
	w.after = cursor.Start
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		next, err := w.step(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures++
			d := retry.Delay(failures, 50*time.Millisecond, 5*time.Second)
			w.cfg.Logger.WarnContext(ctx, "effects: worker step failed, retrying", "worker", w.cfg.Identity, "err", err, "retry_in", d)
			if err := retry.Sleep(ctx, d); err != nil {
				return err
			}
			continue
		}
		failures = 0
		if next == 0 {
			continue // ran an effect: look again at once
		}
		if err := waker.WaitFor(ctx, next); err != nil {
			return err
		}
	}
}

// step catches up with the log, then tries the due heads of sessions in a
// random order and runs the first one it claims. It returns 0 after running
// an effect, else how long to wait before the next due time.
func (w *Worker) step(ctx context.Context) (time.Duration, error) {
	if err := w.catchUp(ctx); err != nil {
		return 0, err
	}
	w.observeBacklog()
	now := time.Now()
	wait := w.cfg.PollInterval
	var due []*Effect
	for s := range w.index.session {
		e := w.index.head(s)
		if e == nil || w.cfg.Handlers[e.Type] == nil {
			continue
		}
		if at := dueAt(e); at.After(now) {
			wait = min(wait, at.Sub(now))
			continue
		}
		due = append(due, e)
	}
	rand.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, e := range due {
		ran, err := w.tryRun(ctx, e.Session)
		if err != nil {
			return 0, err
		}
		if !ran {
			continue
		}
		// Stay on the session a while: its next effect is due now, and
		// tryRun's decision read sees it without waiting for a wake-up.
		for range sameSessionRuns - 1 {
			if ran, err = w.tryRun(ctx, e.Session); err != nil || !ran {
				break
			}
		}
		return 0, err
	}
	return max(wait, time.Millisecond), nil
}

// catchUp folds the effect events that w.after has not seen into the index.
// It reads with decision reads (Read with After), not a tailing read: those
// are not held back by the cluster's oldest running transaction, and each
// event is delivered once, when it first becomes visible (an event of a
// transaction that commits late comes after newer ones; the fold and the
// decision reads of tryRun do not depend on that order).
func (w *Worker) catchUp(ctx context.Context) error {
	for {
		evs, c, err := w.store.ReadAll(ctx, allQuery(), &pgdcb.ReadOptions{After: &w.after, Limit: w.cfg.BatchSize})
		if err != nil {
			return errfmt.Errorf("pgdcb: effects: reading effect events: %w", err)
		}
		for _, ev := range evs {
			w.index.apply(ev)
		}
		w.after = c
		if len(evs) < w.cfg.BatchSize {
			return nil
		}
	}
}

// dueAt is when an unfinished effect may be claimed.
func dueAt(e *Effect) time.Time {
	if e.State == StateExecuting {
		return e.LeaseUntil
	}
	return e.RetryAt
}

// tryRun decides on the session's current events whether its head is due,
// claims it with a conditional append and runs it. ran is false when there
// was nothing to do or another worker claimed first.
func (w *Worker) tryRun(ctx context.Context, session string) (ran bool, err error) {
	m := pgdcb.NewModel(sessionQuery(session), newEffects(), foldEffects)
	cond, err := w.store.Project(ctx, m)
	if err != nil {
		return false, errfmt.Errorf("pgdcb: effects: reading session %q: %w", session, err)
	}
	w.index.reset(session, m.State)
	e := m.State.head(session)
	now := time.Now()
	if e == nil || w.cfg.Handlers[e.Type] == nil || dueAt(e).After(now) {
		return false, nil
	}
	takeover := e.State == StateExecuting
	attempt := e.Attempts + 1
	if takeover && e.Attempts >= w.cfg.MaxAttempts {
		// The last attempt's lease ran out: the effect is failed for good.
		ev := failedEvent(e, failedData{Attempt: e.Attempts, Worker: e.Worker, Error: errLeaseExpired.Error(), Final: true})
		if _, err := w.store.AppendIf(ctx, []pgdcb.Event{ev}, cond); err != nil {
			return false, w.claimError(ctx, e, err)
		}
		w.stats.leaseTakeovers.Add(1)
		w.stats.failed.Add(1)
		w.cfg.Logger.WarnContext(ctx, "effects: effect failed for good", "effect_id", e.ID, "type", e.Type, "attempts", e.Attempts, "err", errLeaseExpired)
		return true, nil
	}
	leaseUntil := now.Add(w.cfg.Lease)
	ev := eventFor(e, typeStarted, startedData{Attempt: attempt, Worker: w.cfg.Identity, LeaseUntil: leaseUntil})
	if _, err := w.store.AppendIf(ctx, []pgdcb.Event{ev}, cond); err != nil {
		return false, w.claimError(ctx, e, err)
	}
	w.stats.claims.Add(1)
	if takeover {
		w.stats.leaseTakeovers.Add(1)
	}
	claimed := *e
	claimed.State, claimed.Attempts, claimed.Worker, claimed.LeaseUntil = StateExecuting, attempt, w.cfg.Identity, leaseUntil
	claimed.LastAttemptAt = now
	t := w.cfg.Tracer
	hctx := ctx
	if t != nil {
		hctx = t.TraceAttemptStart(ctx, TraceAttemptData{Worker: w.cfg.Identity, EffectID: e.ID, Type: e.Type,
			Session: e.Session, Attempt: attempt, Takeover: takeover})
	}
	herr := w.runHandler(hctx, leaseUntil, claimed)
	var rerr error
	if t != nil {
		defer func() {
			t.TraceAttemptEnd(hctx, TraceAttemptData{Worker: w.cfg.Identity, EffectID: e.ID, Type: e.Type,
				Session: e.Session, Attempt: attempt, Duration: time.Since(now), Err: herr, RecordErr: rerr})
		}()
	}
	if herr != nil && ctx.Err() != nil {
		// Stopping: leave the claim to expire, as a dead worker would.
		return true, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(hctx), recordTimeout)
	defer cancel()
	rerr = w.record(rctx, claimed, herr)
	return true, rerr
}

// claimError sorts out a failed claim: a lost race is not an error.
func (w *Worker) claimError(ctx context.Context, e *Effect, err error) error {
	if errors.Is(err, pgdcb.ErrConditionFailed) {
		w.stats.claimConflicts.Add(1)
		return nil
	}
	if errors.Is(err, pgdcb.ErrOutcomeUnknown) {
		// Maybe claimed: the claim's lease will expire and the effect be
		// taken over; nothing runs twice at once.
		w.cfg.Logger.WarnContext(ctx, "effects: claim outcome unknown", "effect_id", e.ID, "err", err)
		return nil
	}
	return errfmt.Errorf("pgdcb: effects: claiming effect %s: %w", e.ID, err)
}

func (w *Worker) runHandler(ctx context.Context, leaseUntil time.Time, e Effect) (err error) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		w.keepLease(hctx, cancel, done, e, leaseUntil)
	}()
	defer func() {
		close(done)
		<-kept
	}()
	defer func() {
		if v := recover(); v != nil {
			err = &handlerPanicError{Type: e.Type, Value: v}
		}
	}()
	return w.cfg.Handlers[e.Type](hctx, e)
}

// record appends the attempt's result, only if the effect is still ours:
// conditioned on the effect's events since a read that shows our claim, so a
// worker whose lease was taken over records nothing.
func (w *Worker) record(ctx context.Context, claimed Effect, herr error) error {
	for try := 1; ; try++ {
		m := pgdcb.NewModel(effectQuery(claimed.ID), newEffects(), foldEffects)
		cond, err := w.store.Project(ctx, m)
		if err != nil {
			return errfmt.Errorf("pgdcb: effects: reading effect %s to record attempt %d: %w", claimed.ID, claimed.Attempts, err)
		}
		e := m.State.byID[claimed.ID]
		if e == nil || e.Attempts != claimed.Attempts || e.Worker != w.cfg.Identity {
			w.stats.lostLeases.Add(1)
			w.cfg.Logger.WarnContext(ctx, "effects: lease taken over, result not recorded", "effect_id", claimed.ID,
				"attempt", claimed.Attempts, "err", herr)
			return nil
		}
		if e.State != StateExecuting {
			return nil // recorded by an earlier try whose outcome was unknown
		}
		var ev pgdcb.Event
		final := false
		if herr == nil {
			ev = eventFor(e, typeCompleted, completedData{Attempt: e.Attempts, Worker: w.cfg.Identity})
		} else {
			final = e.Attempts >= w.cfg.MaxAttempts
			d := failedData{Attempt: e.Attempts, Worker: w.cfg.Identity, Error: herr.Error(), Final: final}
			if !final {
				d.RetryAt = time.Now().Add(retry.Jitter(retry.Delay(e.Attempts, w.cfg.RetryMin, w.cfg.RetryMax)))
			}
			ev = failedEvent(e, d)
		}
		_, err = w.store.AppendIf(ctx, []pgdcb.Event{ev}, cond)
		switch {
		case err == nil:
			switch {
			case herr == nil:
				w.stats.executed.Add(1)
			case final:
				w.stats.failed.Add(1)
				w.cfg.Logger.WarnContext(ctx, "effects: effect failed for good", "effect_id", e.ID, "type", e.Type, "attempts", e.Attempts, "err", herr)
			default:
				w.stats.retried.Add(1)
			}
			return nil
		case (errors.Is(err, pgdcb.ErrConditionFailed) || errors.Is(err, pgdcb.ErrOutcomeUnknown)) && ctx.Err() == nil && try < 10:
			continue // read again: our result, a takeover, or retry
		default:
			return errfmt.Errorf("pgdcb: effects: recording attempt %d of effect %s: %w", e.Attempts, e.ID, err)
		}
	}
}

func eventFor(e *Effect, typ string, data any) pgdcb.Event {
	ev, err := pgdcb.NewEvent(typ, data, idTag(e.ID).String(), sessionTag(e.Session).String())
	if err != nil {
		panic(err) // validated tags, marshalable data
	}
	return ev
}

func failedEvent(e *Effect, d failedData) pgdcb.Event { return eventFor(e, typeFailed, d) }
