package projection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/logical"
)

// ErrNotActive: the projection is PAUSED or FAILED, so WaitFor's target will
// not be reached until it is resumed.
var ErrNotActive = errors.New("pgdcb: projection: not active")

// WaitFor's polling of the checkpoint: from waitPollMin, doubling, up to
// waitPollMax. A batch this process commits wakes waiters at once.
const (
	waitPollMin = 2 * time.Millisecond
	waitPollMax = 50 * time.Millisecond
)

// committed signals the batches this process commits to WaitFor.
type committed struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced at every commit
}

func (c *committed) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *committed) signal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// WaitFor waits until the projection's checkpoint is at or after target —
// every matching event up to target handled and committed with the read
// model — so that a read of the model reflects target: read-your-writes,
// typically with the cursor of the caller's own append
// (pgdcb.AppendResult.Cursor). target may also be a decision cursor
// (Head, ReadAll) or a tailing cursor; only its log point counts.
//
// It reads the checkpoint, so it works in any process, whether this Runner
// leads, stands by or does not run at all (the leader may be elsewhere); a
// batch committed by this process wakes it at once, otherwise it polls
// (2 ms, doubling up to 50 ms). It returns nil once the checkpoint has
// reached target (at once if it already has), ctx's error when ctx ends
// first (give ctx a deadline: an open transaction of the store's database
// delays every tailing reader, docs/SUBSCRIPTIONS.md), and an error matching
// ErrNotActive, with the last error, when the projection is PAUSED or FAILED.
// A checkpoint that does not exist yet (the projection never ran) is waited
// for. In logical decoding mode, whose cursor waits for open transactions,
// it also returns once the logical checkpoint names target's event as
// consumed (logical.Checkpoint.Consumed): that event, and every
// transaction that committed before it, handled, whatever is open
// elsewhere. With Config.Views, the checkpoint is that of the projection
// whose tables the views show (this one, or the one Switch moved them to).
func (r *Runner) WaitFor(ctx context.Context, target cursor.Cursor) error {
	poll := waitPollMin
	var at cursor.Cursor
	for {
		woken := r.commits.wait()
		st, lc, err := r.waitStatus(ctx)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			if ctx.Err() != nil {
				return fmt.Errorf("pgdcb: projection %q: waiting for %s (at %s): %w", r.name, target, at, ctx.Err())
			}
			return err
		case st.State != Active:
			return fmt.Errorf("%w: %q is %s at %s, waiting for %s (last error: %q)", ErrNotActive, r.name, st.State, st.Cursor, target, st.LastError)
		default:
			at = st.Cursor
			if cursor.Compare(at.TransactionID, at.Position, target.TransactionID, target.Position) >= 0 ||
				lc.Consumed(target.TransactionID, target.Position) {
				return nil
			}
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("pgdcb: projection %q: waiting for %s (at %s): %w", r.name, target, at, ctx.Err())
		case <-woken:
			poll = waitPollMin
		case <-t.C:
			poll = min(2*poll, waitPollMax)
		}
		t.Stop()
	}
}

// waitStatus reads what WaitFor needs of the checkpoint: its state, cursor
// and last error, and its logical checkpoint (zero when none or unreadable:
// the cursor alone then decides).
func (r *Runner) waitStatus(ctx context.Context) (Status, logical.Checkpoint, error) {
	var (
		st   Status
		text string
	)
	var view string
	if len(r.rm.views) > 0 {
		view = r.rm.views[0]
	}
	// checkpoints and read_model_views primary keys: with Config.Views, the
	// checkpoint of the projection whose tables the views show (Switch).
	err := r.store.Pool().QueryRow(ctx, `SELECT status, transaction_id, position, coalesce(last_error, ''), coalesce(logical_checkpoint, '')
		FROM `+ident.Schema(r.store)+`.checkpoints
		WHERE name = coalesce((SELECT projection FROM `+ident.Schema(r.store)+`.read_model_views WHERE view_name = $2), $1)`, r.name, view).
		Scan(&st.State, &st.Cursor.TransactionID, &st.Cursor.Position, &st.LastError, &text)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, logical.Checkpoint{}, fmt.Errorf("pgdcb: projection %q: %w", r.name, ErrNotFound)
	}
	if err != nil {
		return st, logical.Checkpoint{}, err
	}
	lc, _ := logical.ParseCheckpoint(text)
	return st, lc, nil
}
