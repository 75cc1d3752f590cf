package effects

import (
	"context"
	"errors"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// TypeLeaseExtended is appended by a worker whose handler still runs a third
// of the way through its lease: it moves the lease's end.
const TypeLeaseExtended = "effect_lease_extended"

type leaseExtendedData struct {
	Attempt    int       `json:"attempt"`
	Worker     string    `json:"worker"`
	LeaseUntil time.Time `json:"lease_until"`
}

// errLeaseLost ends a handler's context when the worker could not keep its
// lease (another worker took the effect over, or the store was unreachable
// until the lease ended).
var errLeaseLost = errors.New("pgdcb: effects: lease lost while the handler ran")

// keepLease extends the claim's lease while the handler runs (until done is
// closed or ctx ends): a third of the way through the lease it appends
// effect_lease_extended, conditioned on the effect's events since a read that
// shows the claim still ours. When the lease cannot be kept, it cancels the
// handler's context with errLeaseLost.
func (w *Worker) keepLease(ctx context.Context, cancel context.CancelCauseFunc, done <-chan struct{}, e Effect, until time.Time) {
	renewIn := w.cfg.Lease / 3
	for {
		next := time.Until(until) - 2*renewIn
		if time.Until(until) <= 0 {
			cancel(errLeaseLost)
			return
		}
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
		case err == nil:
			w.cfg.Logger.WarnContext(ctx, "effects: lease taken over while the handler ran", "effect_id", e.ID, "attempt", e.Attempts, "err", errLeaseLost)
			cancel(errLeaseLost)
			return
		case ctx.Err() != nil:
			return
		default:
			w.cfg.Logger.WarnContext(ctx, "effects: extending a lease failed, retrying", "effect_id", e.ID, "err", err)
			// Retry soon; the loop gives up once the lease has ended.
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-time.After(min(renewIn/3, max(time.Until(until), 0))):
			}
		}
	}
}

// extend appends effect_lease_extended if the claim is still ours; ours is
// false when it is not.
func (w *Worker) extend(ctx context.Context, claimed Effect, until time.Time) (ours bool, err error) {
	m := eventstore.NewModel(effectQuery(claimed.ID), newEffects(), foldEffects)
	cond, err := w.store.Project(ctx, m)
	if err != nil {
		return false, errfmt.Errorf("pgdcb: effects: reading effect %s to extend its lease: %w", claimed.ID, err)
	}
	e := m.State.byID[claimed.ID]
	if e == nil || e.State != StateExecuting || e.Attempts != claimed.Attempts || e.Worker != w.cfg.Identity {
		return false, nil
	}
	ev := eventFor(e, TypeLeaseExtended, leaseExtendedData{Attempt: e.Attempts, Worker: w.cfg.Identity, LeaseUntil: until})
	_, err = w.store.AppendIf(ctx, []eventstore.Event{ev}, cond)
	if errors.Is(err, pgdcb.ErrConditionFailed) {
		return w.extend(ctx, claimed, until) // read again: a takeover, or nothing of ours
	}
	if err != nil {
		return false, errfmt.Errorf("pgdcb: effects: extending the lease of effect %s: %w", claimed.ID, err)
	}
	w.stats.leaseExtensions.Add(1)
	return true, nil
}
