package projection

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/wake"
	"github.com/pgdcb/pgdcb/query"
)

// BatchHandler is a handler that sees each page the tail read whole: its
// events, its cursor, its horizon and the head of the log (a read model that
// also acts on what lies beyond a held horizon, as runstore's snapshot
// projector does). A runner of NewBatchRunner calls it for every batch of an
// ACTIVE projection, empty pages included, in the batch's transaction; the
// transaction commits after it returns nil even when the checkpoint does not
// move, so what it wrote commits then too. An error rolls the batch back and
// counts as a failed batch (backoff, FAILED after MaxAttempts). It must not
// commit or roll back tx.
type BatchHandler interface {
	HandleBatch(ctx context.Context, tx pgx.Tx, b pgdcb.TailBatch) error
}

// AfterCommitter is implemented by a BatchHandler that has work to do once
// its batch committed (outside the transaction, still as the only runner
// that leads). An error counts as a failed batch.
type AfterCommitter interface {
	AfterCommit(ctx context.Context, b pgdcb.TailBatch) error
}

// BeforeReader is implemented by a BatchHandler that must act in the batch's
// transaction before the tail is read: typically to take a lock that
// serialises the read with writers of its own (runstore's snapshot projector
// takes the lock its retention takes, so that a page never holds events a
// retention removed before the page was read). BeforeRead runs on the
// primary, in the batch's transaction, after the checkpoint was read; it
// must not give the transaction a transaction id (a row lock or a write
// would: use a transaction-level advisory lock), or it holds the tailing
// horizon below its own writes. An error counts as a failed batch.
//
// When the store reads on a standby (eventstore.Config.ReadPool), the page
// is read there after the standby has replayed the primary's WAL as of the
// moment BeforeRead returned, so the page shows every transaction that
// committed on the primary before it. The batch then waits for the replay
// lag while it holds what BeforeRead took (at most the runner's
// HeartbeatInterval; past that the batch rolls back without calling the
// handler, and the runner tries again at the next poll).
type BeforeReader interface {
	BeforeRead(ctx context.Context, tx pgx.Tx) error
}

// NewBatchRunner is New with a BatchHandler. Config.Logical is refused
// (*pgdcb.InvalidArgumentError): the handler needs the tail's horizon.
func NewBatchRunner(store *eventstore.Store, name string, q query.Query, h BatchHandler, cfg *Config) (*Runner, error) {
	if h == nil {
		return nil, errors.New("pgdcb: projection.NewBatchRunner: nil handler")
	}
	if cfg != nil && cfg.Logical != nil {
		return nil, errfmt.Errorf("pgdcb: projection.NewBatchRunner %q: %w", name,
			&pgdcb.InvalidArgumentError{Name: "Config.Logical", Reason: "not supported with a BatchHandler"})
	}
	r, err := newRunner(store, name, q, cfg)
	if err != nil {
		return nil, err
	}
	r.bh = h
	return r, nil
}

func (r *Runner) afterCommit(ctx context.Context, b pgdcb.TailBatch) error {
	if ac, ok := r.bh.(AfterCommitter); ok {
		return ac.AfterCommit(ctx, b)
	}
	return nil
}

// StepResult is what one Step did.
type StepResult struct {
	// Led is false when another runner led at the time: the step read
	// nothing.
	Led bool
	// State is the projection's state the step found (it reads only when
	// Active).
	State State
	// Events is how many events the step handled.
	Events int
	// Batch is the page the tail read (zero unless Led and Active). Its
	// Cursor is where the checkpoint is now.
	Batch pgdcb.TailBatch
}

// Step runs one batch in the calling goroutine when no other runner leads
// (the election lock is held for the step only), for callers that bring a
// projection up to date on demand instead of running Run, or beside it. A
// failed batch is recorded as Run records it (FAILED after MaxAttempts) and
// its error returned. Unlike Run's idle batches, a step that only moves the
// cursor writes the checkpoint at once. Not in logical mode (Config.Logical):
// that is refused with a *pgdcb.InvalidArgumentError.
func (r *Runner) Step(ctx context.Context) (StepResult, error) {
	if r.cfg.Logical != nil {
		return StepResult{}, errfmt.Errorf("pgdcb: projection %q: step: %w", r.name,
			&pgdcb.InvalidArgumentError{Name: "Config.Logical", Reason: "Step reads the tail; a logical projection runs with Run only"})
	}
	pool := r.store.Pool()
	if !r.ensured.Load() {
		if err := ensure(ctx, pool, ident.Schema(r.store), r.name); err != nil {
			return StepResult{}, err
		}
		r.ensured.Store(true)
	}
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return StepResult{}, errfmt.Errorf("pgdcb: projection %q: step: %w", r.name, err)
	}
	var got bool
	if err := pc.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, r.k1, r.k2).Scan(&got); err != nil {
		pc.Release()
		return StepResult{}, errfmt.Errorf("pgdcb: projection %q: step: %w", r.name, err)
	}
	if !got {
		pc.Release()
		return StepResult{}, nil
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		if _, err := pc.Exec(uctx, `SELECT pg_advisory_unlock($1, $2)`, r.k1, r.k2); err != nil {
			// The lock may still be held: close the connection, which
			// releases it, rather than return it to the pool.
			_ = pc.Hijack().Close(uctx)
			return
		}
		pc.Release()
	}()
	var lag wake.LagTracker
	res, err := r.batch(ctx, pc.Conn(), &lag, true)
	r.tr.end(r.name, res, err) // as lead does after each batch
	out := StepResult{Led: true, State: res.state, Events: res.n, Batch: res.tail}
	switch {
	case errors.Is(err, errFenced):
		return out, nil // Pause or Reset meanwhile: nothing applied
	case err != nil:
		if ctx.Err() == nil && !pc.Conn().IsClosed() {
			if _, ferr := r.recordFailure(ctx, pc.Conn(), err); ferr != nil {
				r.cfg.Logger.ErrorContext(ctx, "pgdcb: projection: recording a failure failed", "name", r.name, "err", ferr)
			}
		}
		return out, err
	}
	return out, nil
}
