package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// heldtag/appendif/w8 (docs/GROUPCOMMIT.md, "Busy keys"): AppendIf on
// the writers' own boundaries, as appendif/distinct/w8 (grouping on), while a
// transaction of the application holds one unrelated tag (an AppendIfTx on
// held=1, kept open) and heldWaiters appends on that tag wait for it; the
// baseline ("no held tag") is the same operation on the same store with
// nothing held. The ratio is the unrelated appends' throughput with the
// held tag over without it (the target: at least 0.9×, p99 within 2×).
//
// The tag is held while the grouped operation's repetitions run: the first
// call of a repetition of the operation opens the holding transaction and
// starts the waiters, the first call of the baseline's commits it (the
// floor's repetition runs between them, on another table). A hold also ends
// after heldMax, so that a store that freezes behind it still ends its
// repetition.
const (
	heldWaiters = 8
	heldMax     = 5 * time.Second
)

func init() {
	register(Workload{Name: "heldtag/appendif/w8", Group: "heldtag", Writers: 8, Quick: true, Prepare: prepareHeldTag(8)})
}

// holder holds tag held=1 in a transaction of its own while the grouped
// operation runs.
type holder struct {
	env *Env
	st  *eventstore.Store

	mu      sync.Mutex
	release chan struct{} // closed to end the current hold; nil: none
	done    chan struct{} // closed once the current hold and its waiters ended
	err     error

	holds, waited atomic.Int64 // holds opened; appends on the held tag that committed
}

// hold makes sure the tag is held (called by every call of the operation;
// the first of a repetition opens the hold).
func (h *holder) hold(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if h.release != nil {
		return nil
	}
	tx, err := h.env.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	// An idempotency item on (held=1, hold=<n>) takes held=1's key
	// exclusively (its first tag) and matches nothing.
	n := strconv.FormatInt(h.holds.Load(), 10)
	if _, err := h.st.AppendIfTx(ctx, tx, []pgdcb.Event{benchEvent(-1, h.holds.Load(), "held=1")},
		appendif.Condition{Idempotency: query.Tagged(nil, "held=1", "hold="+n)}); err != nil {
		_ = tx.Rollback(ctx)
		return fmt.Errorf("holding the tag: %w", err)
	}
	h.holds.Add(1)
	release, done := make(chan struct{}), make(chan struct{})
	h.release, h.done = release, done
	bg := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for i := range heldWaiters {
		wg.Go(func() {
			_, err := h.st.Append(bg, []pgdcb.Event{benchEvent(-2-i, h.holds.Load(), "held=1")})
			if err != nil {
				h.fail(err)
				return
			}
			h.waited.Add(1)
		})
	}
	go func() {
		select {
		case <-release:
		case <-time.After(heldMax):
		}
		// The held transaction rolls back: its event is not needed, and
		// the waiters' appends then all commit (none is conditional).
		if err := tx.Rollback(bg); err != nil {
			h.fail(err)
		}
		wg.Wait()
		close(done)
	}()
	return nil
}

// unhold ends the hold, if any, and waits for its waiters (called by every
// call of the baseline).
func (h *holder) unhold() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release != nil {
		close(h.release)
		<-h.done
		h.release, h.done = nil, nil
	}
	return h.err
}

func (h *holder) fail(err error) {
	h.mu.Lock()
	if h.err == nil {
		h.err = err
	}
	h.mu.Unlock()
}

// prepareHeldTag: see the top of the file.
func prepareHeldTag(writers int) func(context.Context, *Env) (*Plan, error) {
	return func(_ context.Context, env *Env) (*Plan, error) {
		gs, err := groupedStore(env)
		if err != nil {
			return nil, err
		}
		h := &holder{env: env, st: gs}
		held, free := appendIfDistinctOp(gs, writers, 0), appendIfDistinctOp(gs, writers, offBase)
		p := &Plan{
			Op: func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
				if err := h.hold(ctx); err != nil {
					return 0, err
				}
				return held(ctx, w, seq, c)
			},
			Floor:     floorInsert1(env, nil),
			FloorName: "INSERT 1 row",
			Baselines: []Baseline{{Name: "no held tag", Op: func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
				if err := h.unhold(); err != nil {
					return 0, err
				}
				return free(ctx, w, seq, c)
			}}},
			Check: func(ctx context.Context, c *Counters) error {
				if err := h.unhold(); err != nil {
					return err
				}
				if got, want := h.waited.Load(), h.holds.Load()*heldWaiters; got != want {
					return fmt.Errorf("SELF-CHECK FAILED: %d appends on the held tag committed, want %d", got, want)
				}
				return checkNoConflict(ctx, c)
			},
		}
		withGroupStats(p, gs)
		notes := p.Notes
		p.Notes = func(c *Counters, el float64) string {
			return fmt.Sprintf("%d holds, %d appends on the held tag; %s", h.holds.Load(), h.waited.Load(), notes(c, el))
		}
		return p, nil
	}
}
