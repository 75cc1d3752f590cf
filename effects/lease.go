package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// typeLeaseExtended is appended by a worker whose handler still runs a third
// of the way through its lease: it moves the lease's end.
const typeLeaseExtended = "effect_lease_extended"

type leaseExtendedData struct {
	Attempt    int       `json:"attempt"`
	Worker     string    `json:"worker"`
	LeaseUntil time.Time `json:"lease_until"`
}

// errLeaseLost ends a handler's context when the worker could not keep its
// lease: it is the cause (context.Cause) that errLeaseTakenOver and
// errLeaseNotExtended wrap.
var errLeaseLost = errors.New("pgdcb: effects: lease lost while the handler ran")

var (
	// errLeaseTakenOver: an extension's read showed another worker's claim.
	errLeaseTakenOver = fmt.Errorf("%w: another worker claimed the effect", errLeaseLost)
	// errLeaseNotExtended: no extension reached the store before the lease
	// ended (every try failed).
	errLeaseNotExtended = fmt.Errorf("%w: it could not be extended before it ended", errLeaseLost)
)

// keepLease extends the claim's lease while the handler runs (until done is
// closed or ctx ends): a third of the way through the lease it appends
// effect_lease_extended, conditioned on the effect's events since a read that
// shows the claim still ours. The store decides whether the lease is kept,
// not the worker's clock: an extension that commits, even after the lease's
// end (a claim or an extension slower than the lease), proves that no other
// worker claimed the effect meanwhile, and the handler runs on. The handler's
// context is cancelled with errLeaseTakenOver when a read shows another
// worker's claim, and with errLeaseNotExtended when every try failed (store
// errors) until the lease's end.
func (w *Worker) keepLease(ctx context.Context, cancel context.CancelCauseFunc, done <-chan struct{}, e Effect, until time.Time) {
	renewIn := w.cfg.Lease / 3
	next := time.Until(until) - 2*renewIn // a third of the way through
	for {
		t := time.NewTimer(max(next, 0))
		select {
		case <-done:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		newUntil := time.Now().Add(w.cfg.Lease)
		ours, err := w.extend(ctx, e, newUntil)
		switch {
		case err == nil && ours:
			until = newUntil
			next = time.Until(until) - 2*renewIn
		case err == nil:
			w.cfg.Logger.WarnContext(ctx, "effects: lease taken over while the handler ran", "effect_id", e.ID, "attempt", e.Attempts, "err", errLeaseTakenOver)
			cancel(errLeaseTakenOver)
			return
		case ctx.Err() != nil:
			return
		case !time.Now().Before(until):
			w.cfg.Logger.WarnContext(ctx, "effects: lease ended before it could be extended", "effect_id", e.ID, "attempt", e.Attempts, "err", err)
			cancel(errLeaseNotExtended)
			return
		default:
			w.cfg.Logger.WarnContext(ctx, "effects: extending a lease failed, retrying", "effect_id", e.ID, "err", err)
			// Retry soon, the last time at the lease's end.
			next = min(renewIn/3, time.Until(until))
		}
	}
}

// extend appends effect_lease_extended if the claim is still ours; ours is
// false when it is not.
func (w *Worker) extend(ctx context.Context, claimed Effect, until time.Time) (ours bool, err error) {
	m := pgdcb.NewModel(effectQuery(claimed.ID), newEffects(), foldEffects)
	cond, err := w.store.Project(ctx, m)
	if err != nil {
		return false, errfmt.Errorf("pgdcb: effects: reading effect %s to extend its lease: %w", claimed.ID, err)
	}
	e := m.State.byID[claimed.ID]
	if e == nil || e.State != StateExecuting || e.Attempts != claimed.Attempts || e.Worker != w.cfg.Identity {
		return false, nil
	}
	ev := eventFor(e, typeLeaseExtended, leaseExtendedData{Attempt: e.Attempts, Worker: w.cfg.Identity, LeaseUntil: until})
	_, err = w.store.AppendIf(ctx, []pgdcb.Event{ev}, cond)
	if errors.Is(err, pgdcb.ErrConditionFailed) {
		return w.extend(ctx, claimed, until) // read again: a takeover, or nothing of ours
	}
	if err != nil {
		return false, errfmt.Errorf("pgdcb: effects: extending the lease of effect %s: %w", claimed.ID, err)
	}
	w.stats.leaseExtensions.Add(1)
	return true, nil
}
