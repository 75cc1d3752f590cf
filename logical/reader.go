package logical

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/readpipe"
	"github.com/pgdcb/pgdcb/query"
)

// Batch is what Next hands out.
type Batch struct {
	// Events match the reader's query: in commit order of their
	// transactions, each transaction's events in position order. May be
	// empty when only the checkpoint moved.
	Events []pgdcb.StoredEvent
	// Checkpoint is where to resume after this batch: store it durably with
	// what the batch did, then call Confirm with it.
	Checkpoint Checkpoint
	// Tail is a point in log order at or before which every event was
	// delivered by this batch or an earlier one (a cursor without snapshot,
	// safe as an AppendIf After, on an event that exists). It moves only past
	// transactions that have ended, so an open transaction holds it (not the
	// delivery). It is the Start value given to Open until the first sample
	// of the log (taken after every batch) has been passed by the stream.
	Tail cursor.Cursor
}

// Moved reports whether the batch moved the checkpoint or the tail past from.
func (b Batch) Moved(from Checkpoint, tail cursor.Cursor) bool {
	return !b.Checkpoint.equal(from) || b.Tail != tail
}

// Reader streams the events of one reader (one slot) in commit order. It is
// not safe for concurrent use: one goroutine calls Next and Confirm.
type Reader struct {
	store  *eventstore.Store
	schema string
	q      query.Query
	cfg    Config
	m      *pgtype.Map

	conn *pgconn.PgConn // replication connection while streaming
	cu   *catchUp       // while catching up through the SQL interface
	// streamedAt: when the stream started.
	streamedAt time.Time
	rel        map[uint32]*relation
	cols       []column // parseInsert's, reused

	cp    Checkpoint // after everything handed out
	flush pglogrepl.LSN
	// skipAt and skipN: the resumed transaction (commit LSN) and how many of
	// its rows to drop.
	skipAt pglogrepl.LSN
	skipN  int64
	cur    *txn   // between Begin and Commit
	ready  []*txn // committed, not yet handed out in full
	// passed: every transaction whose commit record starts before it was
	// handed out.
	passed     pglogrepl.LSN
	received   pglogrepl.LSN
	nextStatus time.Time

	// done tracks the consumed transactions beyond the tail (Checkpoint.Done):
	// doneSnap is the snapshot of the last sample the stream passed (nil
	// until one has), doneXIDs the transactions consumed that it does not
	// show, and part the transaction consumed in part.
	doneSnap *cursor.Snapshot
	doneXIDs []uint64 // ascending
	// doneShared: a checkpoint handed out shares doneXIDs (ownDone).
	doneShared bool
	partXID    uint64
	partPos    int64
	// resynced is why the reader resynchronised when Open found its slot
	// lost ("" when it did not).
	resynced string

	tail      cursor.Cursor
	traced    []traced // of the batch in the making, when traceDelivery is set
	pending   *sample
	sconn     *pgx.Conn // for samples, connected on first use
	sampledAt time.Time
	pokedAt   time.Time
}

type txn struct {
	commit, end pglogrepl.LSN
	rows        []pgdcb.StoredEvent
	off         int // rows consumed
	// sent and received: when the server sent the commit message and when
	// the reader had it (for traceDelivery only).
	sent, received time.Time
}

// traceDelivery, when set (by the package's tests and benchmarks, before any
// reader starts), is called by Next for every event it hands out: when the
// server sent the event's commit message, when the reader received it, and
// when Next handed it out. It splits a delivery's latency into the server's
// and the reader's parts (docs/SUBSCRIPTIONS.md "Logical decoding
// latency").
var traceDelivery func(ev *pgdcb.StoredEvent, sent, received, handed time.Time)

// traced is an event handed out and its commit's times (traceDelivery).
type traced struct {
	i              int // in Next's batch
	sent, received time.Time
}

// sample is a reading of the log: its tail point (the last event below the
// snapshot's xmin) and the WAL insert position read after the snapshot. Once
// the stream has passed lsn, every transaction visible in the snapshot was
// handed out, so every event at or before tail was.
type sample struct {
	tail cursor.Cursor
	snap *cursor.Snapshot
	lsn  pglogrepl.LSN
}

// Open starts reader name (one slot; see Config.Slot) over the events of
// store matching q, resuming after from. tail is the log-order point last
// stored with from (Batch.Tail). A zero from starts over from tail: an
// existing slot of the reader is dropped, a new one created, and every event
// after tail committed before the slot is delivered first by a snapshot read
// of the log (in log order), then the stream. With cursor.Start that is every
// event; with the cursor of a tail read (a reader switching to logical
// decoding), the events it had not delivered, once: such a cursor never passes
// an event of a transaction still open.
//
// A detached from (Checkpoint.Detached: the reader ran with tail reads
// since) starts over from tail in the same way, leaving out the events
// from names as consumed after tail: each event once across the switch.
//
// When from needs a slot that is gone (dropped) or invalidated (wal_status
// 'lost': max_slot_wal_keep_size), Open resynchronises: it creates the slot
// anew and first delivers, by a snapshot read of the log in log order, the
// events committed before the new slot that from's Done does not name as
// consumed, then the new slot's stream (Resynced reports it). Every event
// is delivered once: none is skipped, none repeated. Open fails with an
// error matching ErrSlotLost when from cannot resynchronise: it has no Done
// (stored before the reader knew it, or while a backlog was in flight), or
// the slot was lost during a snapshot read.
func Open(ctx context.Context, store *eventstore.Store, name string, q query.Query, from Checkpoint, tail cursor.Cursor, cfg *Config) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pgdcb: logical.Open: %w", err)
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgdcb: logical.Open: %w", err)
	}
	r := &Reader{store: store, schema: store.Schema(), q: readpipe.Query(store, q), cfg: cfg.withDefaults(store.Schema(), name),
		m: pgtype.NewMap(), rel: map[uint32]*relation{}, tail: tail}
	pool := store.Pool()
	if err := ensurePublication(ctx, pool, r.schema, r.cfg.Publication); err != nil {
		return nil, err
	}
	if from.isZero() {
		if err := r.create(ctx); err != nil {
			return nil, err
		}
		r.cp.Sync.After = tail
		return r, nil
	}
	if from.IsDetached() {
		// The reader left this mode (Checkpoint.Detached) and a tail
		// reader may have moved tail since: the old slot's position is
		// stale. Start over after tail with a new slot, leaving out what
		// from names as consumed beyond it.
		if err := r.create(ctx); err != nil {
			return nil, err
		}
		r.cp.Sync.After = tail
		if from.Done.Beyond(tail) {
			r.cp.Done = from.Done
		}
		return r, nil
	}
	st, err := GetSlotStatus(ctx, pool, r.cfg.Slot)
	if err != nil {
		return nil, err
	}
	var lost string
	switch {
	case !st.Exists:
		lost = "it does not exist (dropped?) and the checkpoint " + from.String() + " needs it"
	case st.WALStatus == "lost":
		lost = "wal_status is lost (max_slot_wal_keep_size)"
	case from.Sync == nil && st.ConfirmedFlush > from.LSN:
		// The reader confirms only checkpoints it stored: a slot confirmed
		// beyond the stored one is not the checkpoint's slot (created
		// after it: a resynchronisation whose first batch was not stored,
		// or an operator's), and streaming from it would skip.
		lost = "it was confirmed at " + st.ConfirmedFlush.String() + ", beyond the checkpoint " + from.String() + " (created anew?)"
	}
	if lost != "" {
		if from.Sync != nil || from.Done == nil {
			return nil, &slotLostError{Slot: r.cfg.Slot, Reason: lost + "; the checkpoint cannot resynchronise (it names no consumed set)"}
		}
		// Resynchronise: a new slot, and a snapshot read of what it
		// precedes and from did not consume, after from's tail (every
		// event at or before it was consumed).
		if err := r.create(ctx); err != nil {
			return nil, err
		}
		r.cp.Sync.After = tail
		r.cp.Done = from.Done
		r.resynced = lost
		return r, nil
	}
	r.cp = from
	r.flush = from.LSN
	if d := from.Done; d != nil {
		r.doneSnap, r.doneXIDs, r.partXID, r.partPos = d.Snapshot, slices.Clone(d.XIDs), d.PartXID, d.PartPos
	}
	return r, nil
}

// Resynced is why Open resynchronised the reader from the log (its slot was
// lost), or "" when it did not.
func (r *Reader) Resynced() string { return r.resynced }

// maxDoneXIDs bounds Checkpoint.Done's list: beyond it (a backlog in
// flight, when the stream has not yet passed a sample of the log) the
// checkpoint carries no Done, and a slot lost at that moment stops the
// reader rather than repeat or skip events.
const maxDoneXIDs = 1000

// checkpoint is r.cp with the consumed set, when known.
func (r *Reader) checkpoint() Checkpoint {
	cp := r.cp
	if cp.Sync != nil || r.doneSnap == nil || len(r.doneXIDs) > maxDoneXIDs {
		return cp
	}
	// Handed out without a copy: the next change to the set copies it
	// first (ownDone).
	r.doneShared = true
	cp.Done = &Done{Snapshot: r.doneSnap, XIDs: r.doneXIDs[:len(r.doneXIDs):len(r.doneXIDs)], PartXID: r.partXID, PartPos: r.partPos}
	return cp
}

// ownDone makes r.doneXIDs the reader's own before a change, when a
// checkpoint handed out shares it.
func (r *Reader) ownDone() {
	if r.doneShared {
		r.doneXIDs = slices.Clone(r.doneXIDs)
		r.doneShared = false
	}
}

// addDone adds xid to the consumed set, kept ascending and without
// duplicates (a resumed transaction that was consumed in full comes again).
func (r *Reader) addDone(xid uint64) {
	i, found := slices.BinarySearch(r.doneXIDs, xid)
	if found {
		return
	}
	r.ownDone()
	r.doneXIDs = slices.Insert(r.doneXIDs, i, xid)
}

// Checkpoint is the position after everything Next handed out.
func (r *Reader) Checkpoint() Checkpoint { return r.cp }

// Slot is the reader's replication slot.
func (r *Reader) Slot() string { return r.cfg.Slot }

// create drops the reader's slot if it exists, creates it anew with an
// exported snapshot and reads that snapshot, which the initial read then
// follows (stored in the checkpoint, so it resumes after a restart).
func (r *Reader) create(ctx context.Context) error {
	pool := r.store.Pool()
	st, err := GetSlotStatus(ctx, pool, r.cfg.Slot)
	if err != nil {
		return err
	}
	conn, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// The slot stays held by this connection's walsender until it
		// has exited: wait, so that the slot is free once create returns.
		pid := conn.PID()
		conn.Close(context.WithoutCancel(ctx))
		r.awaitReleased(ctx, pid)
	}()
	if st.Exists {
		// WAIT: a stream of an old leader may still hold it for a moment.
		if err := pglogrepl.DropReplicationSlot(ctx, conn, r.cfg.Slot, pglogrepl.DropReplicationSlotOptions{Wait: true}); err != nil && pgcode.Of(err) != pgcode.UndefinedObject {
			return fmt.Errorf("pgdcb: logical: dropping slot %s: %w", r.cfg.Slot, err)
		}
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, r.cfg.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return fmt.Errorf("pgdcb: logical: creating slot %s: %w", r.cfg.Slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return fmt.Errorf("pgdcb: logical: slot %s: %w", r.cfg.Slot, err)
	}
	// The exported snapshot is valid until the replication connection runs
	// its next command: read it now.
	var text string
	err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET TRANSACTION SNAPSHOT '`+res.SnapshotName+`'`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&text)
	})
	if err != nil {
		return fmt.Errorf("pgdcb: logical: reading slot %s's snapshot: %w", r.cfg.Slot, err)
	}
	snap, err := cursor.ParseSnapshot(text)
	if err != nil {
		return fmt.Errorf("pgdcb: logical: slot %s: %w", r.cfg.Slot, err)
	}
	r.cp = Checkpoint{LSN: lsn, Sync: &syncRead{Snapshot: snap}}
	r.flush = lsn
	return nil
}

// connect opens a replication connection (replication=database) with the
// pool's settings.
func (r *Reader) connect(ctx context.Context) (*pgconn.PgConn, error) {
	cc := r.store.Pool().Config().ConnConfig.Config.Copy()
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("pgdcb: logical: replication connection: %w", err)
	}
	return conn, nil
}

// Close ends the stream and closes the reader's connections (the slot stays,
// at the last confirmed position).
func (r *Reader) Close(ctx context.Context) error {
	r.closeSampleConn(ctx)
	err := r.endCatchUp(ctx)
	if e := r.closeStream(ctx); e != nil {
		err = e
	}
	return err
}

// closeStream closes the replication connection, if any, and waits until
// its walsender has released the slot.
func (r *Reader) closeStream(ctx context.Context) error {
	if r.conn == nil {
		return nil
	}
	pid := r.conn.PID()
	err := r.conn.Close(ctx)
	r.conn = nil
	r.awaitReleased(ctx, pid)
	return err
}

// awaitReleased waits (at most 5 s, whatever ctx) until the slot is no
// longer held by walsender pid: the server ends the walsender of a closed
// replication connection asynchronously, and until then the slot is active,
// so that dropping it (Reset, DropSlot) right after Close would fail or skip
// it. A failure to read the slot's state ends the wait; it is harmless.
func (r *Reader) awaitReleased(ctx context.Context, pid uint32) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for {
		var held bool
		// pg_replication_slots: one row per slot.
		if err := r.store.Pool().QueryRow(wctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots
			WHERE slot_name = $1 AND active_pid = $2)`, r.cfg.Slot, int64(pid)).Scan(&held); err != nil || !held {
			return
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-wctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Confirm tells the server that everything before cp is durable, so the slot
// may release the WAL before it. Call it only after cp was stored durably: on
// a restart the server streams from the last confirmed position at the
// earliest.
func (r *Reader) Confirm(ctx context.Context, cp Checkpoint) error {
	if cp.Sync != nil || cp.LSN <= r.flush {
		return nil
	}
	r.flush = cp.LSN
	if r.cu != nil {
		// Catching up: no stream to tell; the slot is moved now and
		// then (each move decodes the WAL from the slot's restart point).
		if time.Now().Before(r.nextStatus) {
			return nil
		}
		return r.advance(ctx)
	}
	return r.sendStatus(ctx, false)
}

func (r *Reader) sendStatus(ctx context.Context, reply bool) error {
	if r.conn == nil {
		return nil
	}
	write := r.received
	if write < r.flush {
		write = r.flush
	}
	r.nextStatus = time.Now().Add(r.cfg.StatusInterval)
	err := pglogrepl.SendStandbyStatusUpdate(ctx, r.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: write, WALFlushPosition: r.flush, WALApplyPosition: r.flush, ReplyRequested: reply})
	if err != nil {
		return fmt.Errorf("pgdcb: logical: status update: %w", err)
	}
	return nil
}

// Next hands out up to max events (at least one unless wait ran out, then
// the batch may be empty with a checkpoint that moved). It waits at most
// wait for events.
func (r *Reader) Next(ctx context.Context, max int, wait time.Duration) (Batch, error) {
	if r.cp.Sync != nil {
		return r.syncPage(ctx, max)
	}
	if r.conn == nil && r.cu == nil {
		// (Re)starting: a backlog of CatchUpBytes or more is read through
		// the SQL interface first.
		n, err := r.behind(ctx, r.cp.LSN)
		if err != nil {
			return Batch{}, err
		}
		if n >= int64(r.cfg.CatchUpBytes) {
			err = r.beginCatchUp(ctx)
		} else {
			err = r.start(ctx)
		}
		if err != nil {
			return Batch{}, err
		}
	}
	// Sample before waiting, not before handing a batch out: the query
	// would add its round trip to every delivery.
	if time.Since(r.sampledAt) >= sampleEvery {
		if err := r.sampleIfIdle(ctx); err != nil {
			return Batch{}, err
		}
	}
	if r.cu != nil {
		return r.catchUpNext(ctx, max, wait)
	}
	if p := r.pending; p != nil && time.Since(r.streamedAt) >= catchUpAfter &&
		int64(p.lsn)-int64(r.passed) >= catchUpFactor*int64(r.cfg.CatchUpBytes) {
		// Fallen far behind while streaming: what was read and not
		// handed out is read again by the catch-up, from the checkpoint.
		if err := r.closeStream(ctx); err != nil {
			return Batch{}, err
		}
		if err := r.beginCatchUp(ctx); err != nil {
			return Batch{}, err
		}
		return r.catchUpNext(ctx, max, wait)
	}
	deadline := time.Now().Add(wait)
	r.traced = r.traced[:0]
	var linger time.Time // set once a batch has events: gather what follows at once
	var evs []pgdcb.StoredEvent
	for {
		evs = r.take(evs, max)
		now := time.Now()
		if len(evs) > 0 && linger.IsZero() {
			linger = now.Add(lingerFor)
		}
		if len(evs) >= max || (!linger.IsZero() && !now.Before(linger)) || !now.Before(deadline) {
			break
		}
		until := deadline
		if !linger.IsZero() {
			until = linger
		}
		if err := r.receive(ctx, until); err != nil {
			return Batch{}, err
		}
	}
	if traceDelivery != nil {
		now := time.Now()
		for _, t := range r.traced {
			traceDelivery(&evs[t.i], t.sent, t.received, now)
		}
	}
	return Batch{Events: evs, Checkpoint: r.checkpoint(), Tail: r.tail}, nil
}

// lingerFor is how long Next keeps reading after its first event, so that
// a backlog of small transactions comes in full batches. It is most of the
// reader's own share of a delivery's latency, and it is kept: handing out
// only what had arrived at once costs a projection commit per event under
// load, each decoded again by the WAL sender (docs/SUBSCRIPTIONS.md
// "Logical decoding latency").
const lingerFor = time.Millisecond

// sampleEvery bounds how often the log is sampled for the tail cursor.
const sampleEvery = 20 * time.Millisecond

// pokeEvery bounds how often a reader with a sample to pass asks the server
// for its position.
const pokeEvery = 20 * time.Millisecond

// take moves up to max matching events of committed transactions into evs.
func (r *Reader) take(evs []pgdcb.StoredEvent, max int) []pgdcb.StoredEvent {
	for len(r.ready) > 0 && len(evs) < max {
		t := r.ready[0]
		for t.off < len(t.rows) && len(evs) < max {
			ev := t.rows[t.off]
			t.off++
			if r.q.Matches(ev.Type, ev.Tags) {
				if traceDelivery != nil && !t.received.IsZero() {
					r.traced = append(r.traced, traced{i: len(evs), sent: t.sent, received: t.received})
				}
				evs = append(evs, ev)
			}
		}
		r.cp = Checkpoint{LSN: t.commit, Skip: int64(t.off)}
		if t.off < len(t.rows) {
			if t.off > 0 {
				last := t.rows[t.off-1]
				r.partXID, r.partPos = last.TransactionID, last.Position
			}
			break
		}
		if len(t.rows) > 0 {
			if xid := t.rows[0].TransactionID; r.doneSnap == nil || !r.doneSnap.Visible(xid) {
				r.addDone(xid)
			}
		}
		r.partXID, r.partPos = 0, 0
		r.ready = r.ready[1:]
		r.passed = t.end
		r.passSample()
	}
	return evs
}

// passSample makes the pending sample the tail once the stream passed it.
func (r *Reader) passSample() {
	if r.pending != nil && r.passed >= r.pending.lsn {
		if cursor.Compare(r.pending.tail.TransactionID, r.pending.tail.Position, r.tail.TransactionID, r.tail.Position) > 0 {
			r.tail = r.pending.tail
		}
		// Every transaction the sample's snapshot shows was consumed.
		snap := r.pending.snap
		r.doneSnap = snap
		if slices.ContainsFunc(r.doneXIDs, snap.Visible) {
			r.ownDone()
			r.doneXIDs = slices.DeleteFunc(r.doneXIDs, snap.Visible)
		}
		r.pending = nil
	}
}

// sampleIfIdle takes a new sample when none is pending.
func (r *Reader) sampleIfIdle(ctx context.Context) error {
	if r.pending != nil {
		return nil
	}
	var (
		s          sample
		lsn, snaps string
	)
	schema := ident.Quote(r.schema)
	// One statement, so one snapshot: the last event below its xmin (a
	// backward range scan of events_log_order, one row), then the WAL insert
	// position, read after the snapshot was taken: every commit visible in it
	// ends at or before that position.
	db, err := r.sampleConn(ctx)
	if err != nil {
		return err
	}
	err = db.QueryRow(ctx, `SELECT coalesce(t.transaction_id, '0'), coalesce(t.position, 0), pg_current_wal_insert_lsn()::text, s.snap::text
		FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin, pg_current_snapshot() AS snap) s
		LEFT JOIN LATERAL (SELECT transaction_id, position FROM `+schema+`.events
			WHERE transaction_id < s.xmin ORDER BY transaction_id DESC, position DESC LIMIT 1) t ON true`).
		Scan(&s.tail.TransactionID, &s.tail.Position, &lsn, &snaps)
	if err != nil {
		r.closeSampleConn(ctx)
		return fmt.Errorf("pgdcb: logical: sampling the log: %w", err)
	}
	if s.lsn, err = pglogrepl.ParseLSN(lsn); err != nil {
		return fmt.Errorf("pgdcb: logical: sampling the log: %w", err)
	}
	if s.snap, err = cursor.ParseSnapshot(snaps); err != nil {
		return fmt.Errorf("pgdcb: logical: sampling the log: %w", err)
	}
	r.pending = &s
	r.sampledAt = time.Now()
	r.passSample()
	return nil
}

// sampleConn is the reader's own connection for its samples of the log: on
// the pool they would queue behind the application's appends, and every
// delivery waits for the sample before it.
func (r *Reader) sampleConn(ctx context.Context) (*pgx.Conn, error) {
	if r.sconn != nil && !r.sconn.IsClosed() {
		return r.sconn, nil
	}
	conn, err := pgx.ConnectConfig(ctx, r.store.Pool().Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("pgdcb: logical: sampling connection: %w", err)
	}
	r.sconn = conn
	return conn, nil
}

func (r *Reader) closeSampleConn(ctx context.Context) {
	if r.sconn != nil {
		_ = r.sconn.Close(ctx)
		r.sconn = nil
	}
}

// checkSlot fails with a *slotLostError when the reader's slot is gone or
// invalidated.
func (r *Reader) checkSlot(ctx context.Context) error {
	st, err := GetSlotStatus(ctx, r.store.Pool(), r.cfg.Slot)
	if err != nil {
		return err
	}
	if !st.Exists {
		return &slotLostError{Slot: r.cfg.Slot, Reason: "it does not exist (dropped?) and the checkpoint " + r.cp.String() + " needs it"}
	}
	if st.WALStatus == "lost" {
		return &slotLostError{Slot: r.cfg.Slot, Reason: "wal_status is lost (max_slot_wal_keep_size)"}
	}
	return nil
}

// start begins streaming from the checkpoint.
func (r *Reader) start(ctx context.Context) error {
	if err := r.checkSlot(ctx); err != nil {
		return err
	}
	conn, err := r.connect(ctx)
	if err != nil {
		return err
	}
	args := []string{"proto_version '1'", "publication_names '" + r.cfg.Publication + "'"}
	if binaryColumns(conn) {
		args = append(args, "binary 'true'")
	}
	err = pglogrepl.StartReplication(ctx, conn, r.cfg.Slot, r.cp.LSN, pglogrepl.StartReplicationOptions{PluginArgs: args})
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		if pgcode.Of(err) == pgcode.ObjectNotInPrerequisiteState {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && !isSlotBusy(pe) {
				return &slotLostError{Slot: r.cfg.Slot, Reason: pe.Message}
			}
		}
		return fmt.Errorf("pgdcb: logical: starting slot %s at %s: %w", r.cfg.Slot, r.cp.LSN, err)
	}
	r.conn = conn
	r.resume()
	r.streamedAt = time.Now()
	return nil
}

// isSlotBusy: the slot is in use by another process (an old leader whose
// connection the server has not closed yet), worth retrying.
func isSlotBusy(pe *pgconn.PgError) bool {
	return strings.Contains(pe.Message, "is active for PID")
}

// receive handles one message of the stream, or returns when until passes.
func (r *Reader) receive(ctx context.Context, until time.Time) error {
	now := time.Now()
	if !now.Before(r.nextStatus) {
		if err := r.sendStatus(ctx, false); err != nil {
			return err
		}
	}
	idle := r.pending != nil && r.cur == nil && len(r.ready) == 0
	if idle && now.Sub(r.pokedAt) >= pokeEvery {
		// A sample waits for the stream to pass it and nothing is in
		// flight: ask the server where its stream is.
		r.pokedAt = now
		if err := r.sendStatus(ctx, true); err != nil {
			return err
		}
	}
	d := until
	if r.nextStatus.Before(d) {
		d = r.nextStatus
	}
	if idle && r.pokedAt.Add(pokeEvery).Before(d) {
		d = r.pokedAt.Add(pokeEvery)
	}
	rctx, cancel := context.WithDeadline(ctx, d)
	msg, err := r.conn.ReceiveMessage(rctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pgconn.Timeout(err) {
			return nil
		}
		return fmt.Errorf("pgdcb: logical: stream of slot %s: %w", r.cfg.Slot, err)
	}
	switch msg := msg.(type) {
	case *pgproto3.CopyData:
		return r.copyData(ctx, msg.Data)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("pgdcb: logical: stream of slot %s: %w", r.cfg.Slot, pgconn.ErrorResponseToPgError(msg))
	default:
		return fmt.Errorf("pgdcb: logical: stream of slot %s: unexpected %T", r.cfg.Slot, msg)
	}
}

func (r *Reader) copyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("pgdcb: logical: keepalive: %w", err)
		}
		if ka.ServerWALEnd > r.received {
			r.received = ka.ServerWALEnd
		}
		// Every commit that ends at or before the server's sent position
		// was sent, before this message. With nothing in flight, the
		// stream has passed that position.
		if r.cur == nil && len(r.ready) == 0 && ka.ServerWALEnd > r.passed {
			r.passed = ka.ServerWALEnd
			if r.cp.LSN < r.passed {
				r.cp = Checkpoint{LSN: r.passed}
			}
			r.passSample()
		}
		if ka.ReplyRequested {
			return r.sendStatus(ctx, false)
		}
		return nil
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("pgdcb: logical: XLogData: %w", err)
		}
		return r.logical(ctx, xld.WALData, xld.ServerTime)
	}
	return nil
}

func (r *Reader) logical(ctx context.Context, data []byte, sent time.Time) error {
	if len(data) > 0 && data[0] == 'I' {
		return r.insert(data)
	}
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("pgdcb: logical: pgoutput: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		rel := newRelation(m, r.schema)
		if rel.events {
			if err := rel.check(); err != nil {
				return err
			}
		}
		r.rel[m.RelationID] = rel
	case *pglogrepl.BeginMessage:
		r.cur = &txn{commit: m.FinalLSN}
	case *pglogrepl.CommitMessage:
		t := r.cur
		r.cur = nil
		if t == nil {
			return errors.New("pgdcb: logical: commit without begin")
		}
		t.commit, t.end = m.CommitLSN, m.TransactionEndLSN
		if traceDelivery != nil && !sent.IsZero() {
			t.sent, t.received = sent, time.Now()
		}
		if t.end > r.received {
			r.received = t.end
		}
		switch {
		case t.commit < r.skipAt:
			return nil // consumed before the restart
		case t.commit == r.skipAt:
			t.off = int(min(r.skipN, int64(len(t.rows))))
		}
		if err := r.present(ctx, t.rows[t.off:]); err != nil {
			return err
		}
		r.ready = append(r.ready, t)
	}
	return nil
}

// insert decodes an inserted row (parseInsert: the most frequent message,
// read without pglogrepl's allocations).
func (r *Reader) insert(data []byte) error {
	relID, cols, err := parseInsert(data, r.cols)
	r.cols = cols
	if err != nil {
		return err
	}
	rel := r.rel[relID]
	if r.cur == nil || rel == nil {
		return fmt.Errorf("pgdcb: logical: insert outside a transaction or of an unknown relation %d", relID)
	}
	if !rel.events {
		return nil
	}
	ev, err := decodeEvent(rel, r.m, cols)
	if err != nil {
		return err
	}
	r.cur.rows = append(r.cur.rows, ev)
	return nil
}

// syncPage delivers the next page of the initial snapshot read.
func (r *Reader) syncPage(ctx context.Context, max int) (Batch, error) {
	sy, done := r.cp.Sync, r.cp.Done
	snap := sy.Snapshot.String()
	// A resynchronisation leaves out what was consumed before the slot was
	// lost (done); the initial read has no done and leaves out nothing (1:1:
	// shows no transaction).
	doneSnap, doneXIDs, partXID, partPos := "1:1:", "{}", uint64(0), int64(0)
	if done != nil {
		doneSnap, partXID, partPos = done.Snapshot.String(), done.PartXID, done.PartPos
		doneXIDs = xidArray(done.XIDs)
	}
	// events_log_order: a range scan from the sync cursor up to the
	// snapshot's xmax, in log order; the snapshot tests are filters.
	rows, err := r.store.Pool().Query(ctx, `SELECT position, transaction_id, type, tags, data, metadata, event_id, occurred_at
		FROM `+ident.Quote(r.schema)+`.events
		WHERE (transaction_id, position) > ($2::xid8, $3) AND transaction_id < pg_snapshot_xmax($1::pg_snapshot)
		  AND pg_visible_in_snapshot(transaction_id, $1::pg_snapshot)
		  AND NOT pg_visible_in_snapshot(transaction_id, $5::pg_snapshot)
		  AND transaction_id <> ALL($6::text::xid8[])
		  AND NOT (transaction_id = $7::xid8 AND position <= $8)
		ORDER BY transaction_id, position LIMIT $4`, snap, sy.After.TransactionID, sy.After.Position, max,
		doneSnap, doneXIDs, partXID, partPos)
	if err != nil {
		return Batch{}, fmt.Errorf("pgdcb: logical: initial read: %w", err)
	}
	evs, n, last, err := scanEvents(rows, r.q)
	if err != nil {
		return Batch{}, fmt.Errorf("pgdcb: logical: initial read: %w", err)
	}
	if err := readpipe.Present(ctx, r.store, evs); err != nil {
		return Batch{}, err
	}
	if n < max {
		// Done: the stream follows, and every transaction the snapshot
		// shows was consumed.
		r.cp = Checkpoint{LSN: r.cp.LSN}
		r.doneSnap, r.doneXIDs, r.partXID, r.partPos = sy.Snapshot, nil, 0, 0
	} else {
		r.cp = Checkpoint{LSN: r.cp.LSN, Sync: &syncRead{Snapshot: sy.Snapshot, After: last}, Done: done}
	}
	return Batch{Events: evs, Checkpoint: r.checkpoint(), Tail: r.tail}, nil
}

// scanEvents reads rows of events, keeping those matching q; n counts all.
func scanEvents(rows pgx.Rows, q query.Query) (evs []pgdcb.StoredEvent, n int, last cursor.Cursor, err error) {
	defer rows.Close()
	for rows.Next() {
		var (
			ev   pgdcb.StoredEvent
			tgs  []string
			meta []byte
			id   pgtype.UUID
		)
		if err := rows.Scan(&ev.Position, &ev.TransactionID, &ev.Type, &tgs, &ev.Data, &meta, &id, &ev.OccurredAt); err != nil {
			return nil, 0, last, err
		}
		n++
		last = cursor.Cursor{TransactionID: ev.TransactionID, Position: ev.Position}
		if ev.Tags, err = parseTags(tgs); err != nil {
			return nil, 0, last, err
		}
		ev.Metadata = meta
		if id.Valid {
			ev.ID = id.Bytes
		}
		if q.Matches(ev.Type, ev.Tags) {
			evs = append(evs, ev)
		}
	}
	return evs, n, last, rows.Err()
}

// xidArray renders xids as a PostgreSQL array literal.
func xidArray(xids []uint64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, x := range xids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(x, 10))
	}
	b.WriteByte('}')
	return b.String()
}

// present passes the rows of a committed transaction that the reader's
// query matches through the store's read pipeline (eventstore's present,
// through internal/readpipe), in place, before any is handed out; the
// others are never handed out. An error (a bad upcaster) fails the read.
func (r *Reader) present(ctx context.Context, rows []pgdcb.StoredEvent) error {
	if !readpipe.Active(r.store) {
		return nil
	}
	var idx []int
	var evs []pgdcb.StoredEvent
	for i, ev := range rows {
		if r.q.Matches(ev.Type, ev.Tags) {
			idx, evs = append(idx, i), append(evs, ev)
		}
	}
	if len(evs) == 0 {
		return nil
	}
	if err := readpipe.Present(ctx, r.store, evs); err != nil {
		return err
	}
	for j, i := range idx {
		rows[i] = evs[j]
	}
	return nil
}
