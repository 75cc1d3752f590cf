package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// batchLogical is batch in logical mode (Config.Logical). The events come
// from the reader's stream before the transaction begins; the transaction
// then checks the checkpoint row (status, and that the stored logical
// checkpoint is the one the stream resumed from), calls the handler and moves
// both the logical checkpoint and the log-order cursor by compare-and-set.
// Only after the commit is the position confirmed to the server. Whenever a
// batch is not committed, the stream is closed and reopened from the stored
// checkpoint, so nothing it had read is lost or applied twice.
func (r *Runner) batchLogical(ctx context.Context, conn *pgx.Conn, lastWrite time.Time) (batchResult, error) {
	var res batchResult
	schema := ident.Schema(r.store)
	if r.lf.reader == nil {
		var (
			text string
			tail cursor.Cursor
		)
		// checkpoints primary key.
		err := conn.QueryRow(ctx, `SELECT status, transaction_id, position, coalesce(logical_checkpoint, '')
			FROM `+schema+`.checkpoints WHERE name = $1`, r.name).Scan(&res.state, &tail.TransactionID, &tail.Position, &text)
		if err != nil {
			return res, fmt.Errorf("pgdcb: projection %q: reading checkpoint: %w", r.name, err)
		}
		if res.state != Active {
			return res, nil
		}
		if err := r.lf.open(ctx, r.store, r.name, r.q, text, tail, r.cfg.Logical, r.cfg.Logger); err != nil {
			return res, fmt.Errorf("pgdcb: projection %q: %w", r.name, err)
		}
	}
	res.state = Active
	b, err := r.lf.next(ctx, r.cfg.BatchSize, r.cfg.PollInterval)
	if err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: %w", r.name, err)
	}
	res.n = len(b.Events)
	res.full = res.n == r.cfg.BatchSize
	res.waited = true
	if res.n > 0 {
		last := b.Events[res.n-1]
		r.tr.lag(ctx, r.name, subscription.Lag{Behind: max(0, time.Since(last.OccurredAt))})
	}
	// Decided after the read, which waited: the heartbeat would otherwise
	// always come first, and an idle move would never be written.
	writeIdle := time.Since(lastWrite) >= r.cfg.HeartbeatInterval
	moved := b.Moved(r.lf.base, r.lf.baseTail)
	if !moved || (res.n == 0 && !writeIdle) {
		return res, nil
	}
	committed := false
	defer func() {
		if !committed {
			r.closeReader(ctx)
		}
	}()
	tx, rollback, err := begin(ctx, conn)
	if err != nil {
		return res, err
	}
	defer rollback()
	var text string
	// checkpoints primary key.
	err = tx.QueryRow(ctx, `SELECT status, coalesce(logical_checkpoint, '') FROM `+schema+`.checkpoints WHERE name = $1`, r.name).
		Scan(&res.state, &text)
	if err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: reading checkpoint: %w", r.name, err)
	}
	if res.state != Active {
		return res, nil
	}
	base := r.lf.base.String() // up to 1,000 consumed ids: rendered once
	if text != base {
		return res, errFenced
	}
	ctx = r.tr.start(ctx, r.name, &res, r.lf.baseTail)
	if res.n > 0 {
		if err := r.h(ctx, tx, b.Events); err != nil {
			return res, &handlerError{Name: r.name, Cursor: r.lf.baseTail, Err: err}
		}
	}
	// checkpoints primary key. Compare-and-set on the logical checkpoint and
	// the cursor, as in batch.
	tag, err := tx.Exec(ctx, `UPDATE `+schema+`.checkpoints
		SET transaction_id = $2::xid8, position = $3, logical_checkpoint = nullif($4, ''), error_count = 0, leader = $8,
		    heartbeat_at = now(), updated_at = now()
		WHERE name = $1 AND coalesce(logical_checkpoint, '') = $5 AND transaction_id = $6::xid8 AND position = $7 AND status = 'ACTIVE'`,
		r.name, b.Tail.TransactionID, b.Tail.Position, b.Checkpoint.String(), base,
		r.lf.baseTail.TransactionID, r.lf.baseTail.Position, r.cfg.Identity)
	if err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: moving checkpoint: %w", r.name, err)
	}
	if tag.RowsAffected() != 1 {
		return res, errFenced
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: commit: %w", r.name, err)
	}
	committed = true
	res.wrote = true
	r.commits.signal()
	r.lf.committed(ctx, b, r.cfg.Logger, r.name)
	return res, nil
}

// closeReader ends the logical stream, if any; the next batch reopens it from
// the stored checkpoint.
func (r *Runner) closeReader(ctx context.Context) { r.lf.close(ctx) }

// logicalFeed is a logical reader feeding one stored checkpoint (a
// Runner's row, or a partition's): the open stream, and the checkpoint and
// log point stored when it was last written, which the next batch's
// compare-and-set expects. A batch reads from the stream before its
// transaction, commits the read model with the batch's checkpoint, and only
// then confirms the position to the server (committed). Whenever a batch
// is not committed the stream is closed (close), and reopened from the
// stored checkpoint (open), so nothing it had read is lost or applied
// twice. Used by one goroutine.
type logicalFeed struct {
	reader   *logical.Reader
	base     logical.Checkpoint
	baseTail cursor.Cursor
}

// open opens the stream from the stored checkpoint text and its log point
// tail, on cfg's slot (by default reader name's), resynchronising from the
// log when the slot was lost (logical.Open), with a warning.
func (f *logicalFeed) open(ctx context.Context, store *eventstore.Store, name string, q query.Query, text string, tail cursor.Cursor, cfg *logical.Config, logger *slog.Logger) error {
	cp, err := logical.ParseCheckpoint(text)
	if err != nil {
		return err
	}
	rd, err := logical.Open(ctx, store, name, q, cp, tail, cfg)
	if err != nil {
		return err
	}
	if why := rd.Resynced(); why != "" {
		logger.WarnContext(ctx, "pgdcb: projection: replication slot lost; resynchronising from the log", "name", name, "slot", rd.Slot(), "why", why)
	}
	f.reader, f.base, f.baseTail = rd, cp, tail
	return nil
}

// next reads the stream's next batch (logical.Reader.Next), closing the
// stream when it fails.
func (f *logicalFeed) next(ctx context.Context, max int, wait time.Duration) (logical.Batch, error) {
	b, err := f.reader.Next(ctx, max, wait)
	if err != nil {
		f.close(ctx)
	}
	return b, err
}

// committed records b's checkpoint as stored (its batch committed) and
// confirms it to the server. A failed confirmation closes the stream: the
// checkpoint is durable already; the server learns the position at the
// next confirmation, or streams a little again, dropped by LSN.
func (f *logicalFeed) committed(ctx context.Context, b logical.Batch, logger *slog.Logger, name string) {
	f.base, f.baseTail = b.Checkpoint, b.Tail
	if err := f.reader.Confirm(ctx, b.Checkpoint); err != nil {
		logger.WarnContext(ctx, "pgdcb: projection: confirming the stream position failed", "name", name, "err", err)
		f.close(ctx)
	}
}

// close ends the stream, if any; the next batch reopens it from the stored
// checkpoint.
func (f *logicalFeed) close(ctx context.Context) {
	if f.reader == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = f.reader.Close(cctx)
	f.reader = nil
}

// slotMetric records the WAL the projection's slot retains (logical mode).
func (r *Runner) slotMetric(ctx context.Context) {
	if r.cfg.Logical == nil || r.tr.s == nil {
		return
	}
	slot := r.cfg.Logical.Slot
	if slot == "" {
		slot = logical.SlotName(r.store.Schema(), r.name)
	}
	st, err := logical.GetSlotStatus(ctx, r.store.Pool(), slot)
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "pgdcb: projection: reading the slot's status failed", "name", r.name, "err", err)
		return
	}
	r.tr.s.TraceSlot(ctx, r.name, subscription.SlotStatus{RetainedBytes: st.RetainedBytes, Lost: st.WALStatus == "lost"})
}

// dropIdleSlots drops, in tx, each of slots that no reader streams from
// (a streaming reader's next batch is fenced by the reset checkpoint, and it
// then replaces the slot itself). A slot that a reader takes between the
// look and the drop is left to it: each drop runs in a savepoint, and only
// that refusal (object in use) is passed over.
func dropIdleSlots(ctx context.Context, tx pgx.Tx, slots ...string) error {
	for _, slot := range slots {
		err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			// pg_replication_slots: one row per slot.
			_, err := sp.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
				WHERE slot_name = $1 AND NOT active`, slot)
			return err
		})
		var pe *pgconn.PgError
		if err != nil && !(errors.As(err, &pe) && pe.Code == "55006") {
			return err
		}
	}
	return nil
}

// leftLogical parses the logical checkpoint text a tail-read batch found:
// the events that logical decoding consumed beyond the cursor (nil when
// none), and whether text was still bound to a slot (the first tail batch
// after the switch). It fails with a *logical.SwitchError when text does not
// say what was consumed.
func leftLogical(text string) (done *logical.Done, bound bool, err error) {
	if text == "" {
		return nil, false, nil
	}
	cp, err := logical.ParseCheckpoint(text)
	if err != nil {
		return nil, false, err
	}
	d, err := cp.Detached()
	if err != nil {
		return nil, false, err
	}
	return d.Done, !cp.IsDetached(), nil
}

// dropAbandonedSlot drops the projection's default slot after a switch to
// tail reads: a switch back to logical decoding starts over with a new one
// (logical.Checkpoint.Detached), and this one would retain WAL for ever. A
// slot still streamed from (an old leader's) is left, with a warning.
func (r *Runner) dropAbandonedSlot(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	slot := logical.SlotName(r.store.Schema(), r.name)
	// pg_replication_slots: one row per slot.
	_, err := r.store.Pool().Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
		WHERE slot_name = $1 AND NOT active`, slot)
	if err == nil {
		var st logical.SlotStatus
		if st, err = logical.GetSlotStatus(ctx, r.store.Pool(), slot); err == nil && !st.Exists {
			r.cfg.Logger.InfoContext(ctx, "pgdcb: projection: switched to tail reads; dropped the logical decoding slot", "name", r.name, "slot", slot)
			return
		}
	}
	r.cfg.Logger.WarnContext(ctx, "pgdcb: projection: switched to tail reads; the logical decoding slot is left and retains WAL: drop it with logical.DropSlot once no reader streams from it",
		"name", r.name, "slot", slot, "err", err)
}
