package projection

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/logical"
)

// roundRead is one read of the log for the partitions a worker holds: the
// page read after the lowest of their checkpoints, and, per partition, its
// checkpoint and its events of the page after it.
type roundRead struct {
	tail   pgdcb.TailBatch
	full   bool                        // the page was full: more may follow
	curs   map[int]cursor.Cursor       // checkpoint of each partition read
	evs    map[int][]pgdcb.StoredEvent // its events after its checkpoint
	fenced []int                       // claimed by another worker meanwhile
	// left: of each partition that logical decoding fed before
	// (PartitionConfig.Logical), its logical checkpoint as stored and what
	// it consumed beyond the cursor (leftLogical).
	left map[int]*leftPartition
}

// leftPartition is what a partition's logical checkpoint says when tail
// reads resume it (Runner.batch's switch back from logical decoding).
type leftPartition struct {
	text  string        // as stored
	done  *logical.Done // consumed beyond the cursor
	bound bool          // still bound to its slot: drop it after the batch
}

// read reads the checkpoints of parts (held by this worker) and one page of
// the projection's query after the lowest of them, in one READ COMMITTED
// transaction that writes nothing. The page holds every matching event
// after that checkpoint up to tail.Cursor (the tail's rules), so for each
// partition it holds every event of the partition after its own checkpoint
// up to there: its batch handles them and may move its checkpoint to
// tail.Cursor, never past an event it has not handled. ok is false when the
// page could not be read yet (Runner.readTail).
func (lw *leaseWorker) read(ctx context.Context, parts []int) (rd roundRead, ok bool, _ error) {
	p := lw.p
	conn, err := p.store.Pool().Acquire(ctx)
	if err != nil {
		return rd, false, err
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return rd, false, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	ps := make([]int32, len(parts))
	for i, part := range parts {
		ps[i] = int32(part)
	}
	// projection_partitions primary key.
	rows, err := tx.Query(ctx, `SELECT partition, transaction_id, position, owner, epoch, coalesce(logical_checkpoint, '')
		FROM `+lw.schema+`.projection_partitions WHERE name = $1 AND partition = ANY($2)`, p.name, ps)
	if err != nil {
		return rd, false, fmt.Errorf("pgdcb: projection %q: reading partitions: %w", p.name, err)
	}
	rd.curs = map[int]cursor.Cursor{}
	var (
		from  cursor.Cursor
		part  int32
		cur   cursor.Cursor
		owner *string
		epoch int64
		text  string
	)
	rd.left = map[int]*leftPartition{}
	_, err = pgx.ForEachRow(rows, []any{&part, &cur.TransactionID, &cur.Position, &owner, &epoch, &text}, func() error {
		if hp := lw.held[int(part)]; hp == nil || owner == nil || *owner != lw.id || epoch != hp.epoch {
			rd.fenced = append(rd.fenced, int(part))
			return nil
		}
		if text != "" {
			// Fed by logical decoding before: what it consumed beyond the
			// cursor (commit order) is not handled again.
			done, bound, err := leftLogical(text)
			if err != nil {
				return fmt.Errorf("pgdcb: projection %q: partition %d: %w", p.name, part, err)
			}
			rd.left[int(part)] = &leftPartition{text: text, done: done, bound: bound}
		}
		if len(rd.curs) == 0 || cursor.Compare(cur.TransactionID, cur.Position, from.TransactionID, from.Position) < 0 {
			from = cur
		}
		rd.curs[int(part)] = cur
		return nil
	})
	if err != nil || len(rd.curs) == 0 {
		return rd, false, err
	}
	rd.tail, ok, err = p.r.readTail(ctx, tx, from)
	if err != nil || !ok {
		return rd, false, err
	}
	rd.full = len(rd.tail.Events) == p.cfg.BatchSize
	// Filtered here, not in SQL: a prototype that kept a partition's events
	// in the statement (a hash of the key's value extracted from the tags
	// per row) read 0.4-0.8× as many events/s as pages of the whole query
	// filtered here (20k events, 8 partitions, 2026-11-29, loaded machine).
	rd.evs = map[int][]pgdcb.StoredEvent{}
	for i := range rd.tail.Events {
		ev := &rd.tail.Events[i]
		part := partitionOf(ev, p.key, p.n)
		c, held := rd.curs[part]
		if !held || cursor.Compare(ev.TransactionID, ev.Position, c.TransactionID, c.Position) <= 0 {
			continue
		}
		if l := rd.left[part]; l != nil && l.done != nil && l.done.Has(ev.TransactionID, ev.Position) {
			continue // handled by logical decoding already
		}
		rd.evs[part] = append(rd.evs[part], *ev)
	}
	return rd, true, nil
}

// batch runs the batch of partition hp over rd in one READ COMMITTED
// transaction, as Runner.batch does for a whole projection: call the
// handler with the partition's events of the page, and move the checkpoint
// to the page's cursor by compare-and-set on the checkpoint rd read and the
// epoch of this worker's claim (fencing: once another worker claimed the
// partition, the update matches nothing and the batch rolls back with
// errFenced). A partition whose checkpoint is at or after the page's cursor
// has nothing in it. writeIdle also moves a checkpoint that got no events.
// A partition that logical decoding fed before has its logical checkpoint
// detached (or cleared) at once, and its slot dropped, as Runner.batch
// does after a switch back to tail reads.
func (lw *leaseWorker) batch(ctx context.Context, hp *heldPartition, rd *roundRead, writeIdle bool) (batchResult, error) {
	res := batchResult{full: rd.full}
	p := lw.p
	cur, to := rd.curs[hp.partition], rd.tail.Cursor
	evs := rd.evs[hp.partition]
	res.n = len(evs)
	moved := cursor.Compare(to.TransactionID, to.Position, cur.TransactionID, cur.Position) > 0
	var text, newText string // the logical checkpoint stored, and to store
	l := rd.left[hp.partition]
	if l != nil {
		text = l.text
		if l.done != nil && l.done.Beyond(to) {
			newText = logical.Checkpoint{Done: l.done}.String()
		}
		if !moved {
			to = cur
		}
	}
	detach := newText != text
	if (!moved && !detach) || (res.n == 0 && !res.full && !writeIdle && !detach) {
		return res, nil
	}
	tx, done, err := beginBatch(ctx, p.store.Pool())
	if err != nil {
		return res, err
	}
	defer done()
	if res.n > 0 {
		if err := p.h(ctx, tx, evs); err != nil {
			return res, &handlerError{Name: fmt.Sprintf("%s[%d]", p.name, hp.partition), Cursor: cur, Err: err}
		}
	}
	// projection_partitions primary key. Compare-and-set on the cursor read
	// and on the claim's owner and epoch: READ COMMITTED re-checks the WHERE
	// on the newest row version, so a claim by another worker that
	// committed meanwhile (or waits on this row) makes it match nothing.
	tag, err := tx.Exec(ctx, `UPDATE `+lw.schema+`.projection_partitions
		SET transaction_id = $3::xid8, position = $4, logical_checkpoint = nullif($9, ''), updated_at = now()
		WHERE name = $1 AND partition = $2 AND owner = $5 AND epoch = $6
		  AND transaction_id = $7::xid8 AND position = $8 AND coalesce(logical_checkpoint, '') = $10`,
		p.name, hp.partition, to.TransactionID, to.Position, lw.id, hp.epoch, cur.TransactionID, cur.Position, newText, text)
	if err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: moving partition %d: %w", p.name, hp.partition, err)
	}
	if tag.RowsAffected() != 1 {
		return res, errFenced
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: commit of partition %d: %w", p.name, hp.partition, err)
	}
	res.wrote = true
	if l != nil && l.bound {
		lw.dropAbandonedSlot(ctx, hp.partition)
	}
	return res, nil
}

// dropAbandonedSlot drops partition part's slot after its switch to tail
// reads, as Runner.dropAbandonedSlot does a projection's: a switch back to
// logical decoding starts over with a new one (Checkpoint.Detached), and
// this one would retain WAL for ever. A slot still streamed from is left,
// with a warning.
func (lw *leaseWorker) dropAbandonedSlot(ctx context.Context, part int) {
	p := lw.p
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	slot := partitionSlot(p.store.Schema(), p.name, part)
	// pg_replication_slots: one row per slot.
	_, err := p.store.Pool().Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
		WHERE slot_name = $1 AND NOT active`, slot)
	if err == nil {
		var st logical.SlotStatus
		if st, err = logical.GetSlotStatus(ctx, p.store.Pool(), slot); err == nil && !st.Exists {
			return
		}
	}
	p.cfg.Logger.WarnContext(ctx, "pgdcb: projection: switched to tail reads; the partition's logical decoding slot is left and retains WAL: drop it with logical.DropSlot once no reader streams from it",
		"name", p.name, "partition", part, "slot", slot, "err", err)
}

// beginBatch acquires a connection of pool and begins a batch's
// transaction on it; done rolls back what was not committed and releases
// the connection.
func beginBatch(ctx context.Context, pool *pgxpool.Pool) (tx pgx.Tx, done func(), err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	tx, rollback, err := begin(ctx, conn.Conn())
	if err != nil {
		conn.Release()
		return nil, nil, err
	}
	return tx, func() { rollback(); conn.Release() }, nil
}

// begin begins a batch's transaction on conn; rollback rolls back what was
// not committed, bounded: on a connection that stopped answering, an
// unbounded rollback would keep Run from returning (a failed rollback
// closes the connection, which ends a leadership).
func begin(ctx context.Context, conn *pgx.Conn) (tx pgx.Tx, rollback func(), err error) {
	tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, nil, err
	}
	return tx, func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}, nil
}
