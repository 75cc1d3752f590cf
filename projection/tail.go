package projection

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// readTail reads the page of a batch after cur. tx is the batch's
// transaction on the primary; ok is false when the page could not be read
// yet (a fence the standby has not replayed within the bound: the batch
// reads nothing and the runner tries again at the next poll).
//
// Without a read pool the page is read in tx, as before. With one
// (eventstore.Config.ReadPool) it is read on the standby, and only the
// handler's writes and the checkpoint's compare-and-set run in tx. That
// keeps a batch exactly once and in order: the page starts after the
// checkpoint tx read, the checkpoint moves only from that value (the
// compare-and-set refuses a batch whose starting point moved meanwhile), and
// the tail's horizon and cursor on a standby come from what the standby's
// snapshot proves (docs/REPLICAS.md, "Projections, the outbox"). A
// standby behind the checkpoint shows nothing after it, and the tail never
// moves a cursor backwards, so the batch only waits.
//
// A handler that is a BeforeReader acts in tx first; on a standby the page
// is then read on one connection after that connection saw the standby
// replay the primary's WAL insert position as of after the hook (a
// connection lives within one run of the standby server, whose replay only
// moves forward), so the page shows every commit that preceded the hook.
func (r *Runner) readTail(ctx context.Context, tx pgx.Tx, cur cursor.Cursor) (_ pgdcb.TailBatch, ok bool, _ error) {
	opts := eventstore.TailOptions{After: cur, Limit: r.cfg.BatchSize, MetadataContains: r.cfg.MetadataContains}
	br, fenced := r.bh.(BeforeReader)
	if fenced {
		if err := br.BeforeRead(ctx, tx); err != nil {
			return pgdcb.TailBatch{}, false, &handlerError{Name: r.name, Cursor: cur, Err: err}
		}
	}
	standby := r.store.ReadPool()
	if standby == r.store.Pool() {
		tb, err := r.store.ReadTailWithTx(ctx, tx, r.q, opts)
		return tb, err == nil, err
	}
	if !fenced {
		tb, err := r.store.ReadTailWith(ctx, r.q, opts)
		return tb, err == nil, err
	}
	var lsn string
	if err := tx.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return pgdcb.TailBatch{}, false, errfmt.Errorf("pgdcb: projection %q: reading the WAL position: %w", r.name, err)
	}
	c, err := standby.Acquire(ctx)
	if err != nil {
		return pgdcb.TailBatch{}, false, errfmt.Errorf("pgdcb: projection %q: read pool: %w", r.name, err)
	}
	defer c.Release()
	replayed, err := waitReplay(ctx, c.Conn(), lsn, r.cfg.HeartbeatInterval)
	if err != nil || !replayed {
		if err != nil {
			err = errfmt.Errorf("pgdcb: projection %q: waiting for the standby's replay: %w", r.name, err)
		}
		return pgdcb.TailBatch{}, false, err
	}
	stx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly})
	if err != nil {
		return pgdcb.TailBatch{}, false, errfmt.Errorf("pgdcb: projection %q: read pool: %w", r.name, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = stx.Rollback(rctx)
	}()
	tb, err := r.store.ReadTailWithTx(ctx, stx, r.q, opts)
	return tb, err == nil, err
}

// waitReplay polls conn (1 ms, doubling up to 50 ms) until its server has
// replayed the WAL up to lsn, or is not in recovery (it shows its own
// commits). It returns false when that did not happen within bound.
func waitReplay(ctx context.Context, conn *pgx.Conn, lsn string, bound time.Duration) (bool, error) {
	deadline := time.Now().Add(bound)
	delay := time.Millisecond
	for {
		var done bool
		err := conn.QueryRow(ctx, `SELECT NOT pg_is_in_recovery()
			OR coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, lsn).Scan(&done)
		if err != nil || done {
			return done, err
		}
		if time.Now().Add(delay).After(deadline) {
			return false, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}
