package eventstore

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/horizon"
	"github.com/pgdcb/pgdcb/internal/pgjson"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Events is the result of Read: iterate it once with All, then take Cursor.
type events struct {
	seq     iter.Seq2[pgdcb.StoredEvent, error]
	cursor  cursor.Cursor
	head    cursor.Cursor // the last event in log order, with the snapshot
	durable cursor.Cursor // tailing reads: the last event below the horizon
	horizon uint64        // tailing reads: the horizon (internal/horizon)
	holder  horizon.Holder
	started bool
	done    bool
}

// All yields the events in log order (or reversed with Backwards), streaming
// them from the server. Stop early by breaking out of the loop. Iterate once.
func (e *events) All() iter.Seq2[pgdcb.StoredEvent, error] { return e.seq }

// Cursor is the decision cursor of the read, valid once All has run to the end
// without error: it carries the read's snapshot, so an AppendIf with
// FailIf(sameQuery, &cursor) fails if any matching event appears that this read
// did not see. ok is false when the iteration did not finish.
//
// A read that ran to the end (no Limit hit) has seen every visible event
// matching its query; its cursor is the head of the log in its snapshot. A
// forward read stopped by Limit has seen only up to its last event, and its
// cursor says so. A backward read's decision is taken to cover every visible
// event (it chose to look at the newest ones).
func (e *events) Cursor() (c cursor.Cursor, ok bool) { return e.cursor, e.done }

// Read streams the events matching q (see package query) in log order. All
// events come from one snapshot. It runs on Config.ReadPool when set (a
// standby: docs/REPLICAS.md), else on the store's pool.
func (s *Store) Read(ctx context.Context, q query.Query, opts *pgdcb.ReadOptions) pgdcb.Events {
	return s.tracedRead(ctx, s.ReadPool(), ReadOpRead, q, opts)
}

// ReadTx is Read in the caller's transaction (its snapshot rules apply: under
// READ COMMITTED the read is one statement, so still one snapshot).
func (s *Store) ReadTx(ctx context.Context, tx pgx.Tx, q query.Query, opts *pgdcb.ReadOptions) pgdcb.Events {
	return s.tracedRead(ctx, tx, ReadOpRead, q, opts)
}

// ReadAll reads every matching event into memory and returns them with the
// decision cursor.
func (s *Store) ReadAll(ctx context.Context, q query.Query, opts *pgdcb.ReadOptions) ([]pgdcb.StoredEvent, cursor.Cursor, error) {
	return collect(s.Read(ctx, q, opts))
}

// ReadAllTx is ReadAll in the caller's transaction.
func (s *Store) ReadAllTx(ctx context.Context, tx pgx.Tx, q query.Query, opts *pgdcb.ReadOptions) ([]pgdcb.StoredEvent, cursor.Cursor, error) {
	return collect(s.ReadTx(ctx, tx, q, opts))
}

func collect(es pgdcb.Events) ([]pgdcb.StoredEvent, cursor.Cursor, error) {
	var out []pgdcb.StoredEvent
	for ev, err := range es.All() {
		if err != nil {
			return nil, cursor.Cursor{}, err
		}
		out = append(out, ev)
	}
	c, _ := es.Cursor()
	return out, c, nil
}

// ReadLast returns the last event matching q (nil if none) and the decision
// cursor: an AppendIf with FailIf(q, &cursor) fails if a newer matching event
// appears (the gapless-number pattern).
func (s *Store) ReadLast(ctx context.Context, q query.Query) (*pgdcb.StoredEvent, cursor.Cursor, error) {
	return readLast(s.tracedRead(ctx, s.ReadPool(), ReadOpReadLast, q, &pgdcb.ReadOptions{Limit: 1, Backwards: true}))
}

// ReadLastTx is ReadLast in the caller's transaction.
func (s *Store) ReadLastTx(ctx context.Context, tx pgx.Tx, q query.Query) (*pgdcb.StoredEvent, cursor.Cursor, error) {
	return readLast(s.tracedRead(ctx, tx, ReadOpReadLast, q, &pgdcb.ReadOptions{Limit: 1, Backwards: true}))
}

func readLast(es pgdcb.Events) (*pgdcb.StoredEvent, cursor.Cursor, error) {
	evs, c, err := collect(es)
	if err != nil || len(evs) == 0 {
		return nil, c, err
	}
	return &evs[0], c, nil
}

// Head returns a cursor at the end of the log, carrying the current snapshot:
// as an After it means "every event visible now was seen". On a standby
// (Config.ReadPool) it counts as seen only what the standby can prove.
func (s *Store) Head(ctx context.Context) (cursor.Cursor, error) {
	return s.head(ctx, s.ReadPool())
}

// HeadTx is Head in the caller's transaction.
func (s *Store) HeadTx(ctx context.Context, tx pgx.Tx) (cursor.Cursor, error) {
	return s.head(ctx, tx)
}

func (s *Store) head(ctx context.Context, db dbtx) (_ cursor.Cursor, err error) {
	ctx, t := s.startRead(ctx, ReadOpHead, query.Query{}, db)
	defer func() { t.endRead(ReadOpHead, err) }()
	proved := s.proved(db)
	for {
		var snapText string
		var c cursor.Cursor
		pf := s.newProof(proved)
		sql, a := s.sql.head[0], []any(nil)
		if proved {
			sql, a = s.sql.head[1], []any{s.proofArg()}
		}
		var at pgtype.Timestamptz
		if err := db.QueryRow(ctx, sql, a...).Scan(append([]any{&snapText, &c.TransactionID, &c.Position, &at}, pf.dest()...)...); err != nil {
			return cursor.Cursor{}, errf("head", err)
		}
		c.EventTime = unixMicros(at)
		snap, err := cursor.ParseSnapshot(snapText)
		if err != nil {
			return cursor.Cursor{}, errf("head", err)
		}
		c.Snapshot = snap
		if !pf.exceeded(c) {
			return pf.cursor(c), nil
		}
		// Past the proof's bounds on a standby: the primary's head.
		db, proved = s.pool, false
	}
}

// readSQL is one statement: the snapshot and the head of the log (one row,
// s × h) joined to the matching events, so all come from the same snapshot
// even when the caller's transaction is READ COMMITTED. A LEFT JOIN on TRUE
// can only be a nested loop with the one-row side outside, so rows come out in
// the inner ORDER BY's order; the header columns arrive with every row but are
// scanned from the first only.
//
// A tailing read (tail) also keeps to rows of transactions below the horizon
// (internal/horizon: the least id the snapshot lists as running that is not
// proven to run in another database): nothing can commit behind them. Its
// header also carries the horizon and the transaction at it.
func (s *Store) readSQL(q query.Query, opts pgdcb.ReadOptions, tail, proved bool) (string, args) {
	var a args
	// A read from the start (a decision read, ReadLast) fixes its tag items'
	// plan, and its typed items' too with Config.TypedReadsGeneric (see
	// whereItems); reads after a cursor keep the values visible, for the
	// planner to weigh the tag against the range since the cursor.
	fromStart := opts.After == nil && !tail
	where := whereItems(q, &a, fromStart, fromStart && s.cfg.TypedReadsGeneric)
	if tail {
		// events_log_order range, bounded above by the horizon.
		where += " AND e.transaction_id < hz.horizon"
	}
	if opts.After != nil {
		where += " AND " + whereNotSeen(*opts.After, &a)
	}
	if len(opts.MetadataContains) > 0 {
		where += " AND " + metadataContains(opts.MetadataContains)
	}
	dir := "ASC"
	if opts.Backwards {
		dir = "DESC"
	}
	limit := ""
	if opts.Limit > 0 {
		limit = " LIMIT " + a.add(int64(opts.Limit))
	}
	from := s.sql.events + " e"
	if opts.Backwards && opts.Limit > 0 && hasTagItem(q) {
		// "The newest N with these tags" (ReadLast): fenced (OFFSET 0) so the
		// tag index finds the rows and a top-N sort picks the newest, at a
		// cost bounded by the tag's size. Unfenced, a tag the statistics
		// sample happened to see often made the planner walk
		// events_log_order backwards over most of the table.
		from = "(SELECT * FROM " + s.sql.events + " e WHERE " + where + " OFFSET 0) e"
		where = "TRUE"
	}
	// The durable point (tailing reads only): the last event below the
	// horizon, a backward scan of events_log_order from the horizon, one row.
	// A tailing cursor never moves past it (see TailBatch.Cursor).
	// Only a tailing read has these header columns (readTargets).
	durable, durableJoin := "", ""
	// A decision read proves its cursor on a standby (provenJoin); a
	// tailing read's cursor is the durable point, below the horizon, which
	// is the standby's xmin there already (internal/horizon).
	proven, provenSQL := "", ""
	if proved && !tail {
		proven, provenSQL = s.proofSQL(true, "s.snap", a.add(s.proofArg()))
	}
	if tail {
		durable = `, coalesce(d.transaction_id, '0'), coalesce(d.position, 0), d.occurred_at, ` + horizon.Columns
		durableJoin = horizon.Join("s.snap", "h.transaction_id") + `
		LEFT JOIN LATERAL (SELECT transaction_id, position, occurred_at FROM ` + s.sql.events + `
			WHERE transaction_id < hz.horizon
			ORDER BY transaction_id DESC, position DESC LIMIT 1) d ON true`
	}
	sql := `SELECT s.snap::text, coalesce(h.transaction_id, '0'), coalesce(h.position, 0), h.occurred_at` + durable + proven + `, r.*
		FROM (SELECT pg_current_snapshot() AS snap) s
		LEFT JOIN LATERAL (SELECT transaction_id, position, occurred_at FROM ` + s.sql.events + `
			ORDER BY transaction_id DESC, position DESC LIMIT 1) h ON true` + durableJoin + provenSQL + `
		LEFT JOIN LATERAL (SELECT ` + s.sql.eventCols + ` FROM ` + from + `
			WHERE ` + where + `
			ORDER BY e.transaction_id ` + dir + `, e.position ` + dir + limit + `) r ON true`
	return sql, a
}

func hasTagItem(q query.Query) bool {
	for _, it := range q.Items() {
		if it.Tags.Len() > 0 {
			return true
		}
	}
	return false
}

func (s *Store) read(ctx context.Context, db dbtx, q query.Query, opts *pgdcb.ReadOptions) *events {
	return s.readMode(ctx, db, q, opts, false)
}

func (s *Store) readMode(ctx context.Context, db dbtx, q query.Query, opts *pgdcb.ReadOptions, tail bool) *events {
	var o pgdcb.ReadOptions
	if opts != nil {
		o = *opts
	}
	es := &events{}
	es.seq = func(yield func(pgdcb.StoredEvent, error) bool) {
		if err := q.Validate(); err != nil {
			yield(pgdcb.StoredEvent{}, err)
			return
		}
		if o.Limit < 0 {
			yield(pgdcb.StoredEvent{}, &pgdcb.InvalidArgumentError{Name: "ReadOptions.Limit",
				Reason: fmt.Sprintf("must not be negative (got %d; 0 means no limit)", o.Limit)})
			return
		}
		if err := pgjson.ValidateObject("ReadOptions.MetadataContains", o.MetadataContains); err != nil {
			yield(pgdcb.StoredEvent{}, err)
			return
		}
		if es.started {
			yield(pgdcb.StoredEvent{}, errReadTwice)
			return
		}
		es.started = true
		q := s.expand(q)
		proved := !tail && s.proved(db)
		for s.readOnce(ctx, db, q, o, tail, proved, es, yield) {
			// Past the proof's bounds on a standby: the read runs again
			// on the primary (nothing was yielded yet).
			db, proved = s.pool, false
		}
	}
	return es
}

// readOnce runs readMode's statement on db and yields its events; again
// reports that the read's proof is past its bounds (proof.exceeded), found
// on the first row, before any event was yielded: the read must run again
// on the primary.
func (s *Store) readOnce(ctx context.Context, db dbtx, q query.Query, o pgdcb.ReadOptions, tail, proved bool,
	es *events, yield func(pgdcb.StoredEvent, error) bool) (again bool) {
	sql, a := s.readSQL(q, o, tail, proved)
	rows, err := readQuery(ctx, db, tail, o.After == nil && !tail, sql, a...)
	if err != nil {
		yield(pgdcb.StoredEvent{}, errf("read", err))
		return false
	}
	defer rows.Close()
	var (
		snapText string
		head     cursor.Cursor
		headAt   pgtype.Timestamptz
		durAt    pgtype.Timestamptz
		n        int
		last     pgdcb.StoredEvent
		traced   = s.traceOf(ctx)
		pf       = s.newProof(proved)
	)
	// The header columns repeat on every row; scan them once.
	hdr := []any{&snapText, &head.TransactionID, &head.Position, &headAt}
	if tail {
		hdr = append(hdr, &es.durable.TransactionID, &es.durable.Position, &durAt, &es.horizon, &es.holder.PID, &es.holder.Database)
	}
	first, rest := rowTargets(append(hdr, pf.dest()...))
	// Events are handed out in batches, each through the read pipeline
	// (present) first.
	buf := make([]pgdcb.StoredEvent, 0, presentCap(o.Limit))
	flush := func() bool {
		if len(buf) == 0 {
			return true
		}
		if err := s.present(ctx, buf); err != nil {
			yield(pgdcb.StoredEvent{}, err)
			return false
		}
		for _, ev := range buf {
			traced.addEvents(1)
			if !yield(ev, nil) {
				return false
			}
		}
		buf = buf[:0]
		return true
	}
	for rows.Next() {
		targets := rest
		if n == 0 {
			targets = first
		}
		ev, ok, err := scanEventRow(rows, targets...)
		if err != nil {
			yield(pgdcb.StoredEvent{}, errf("read", err))
			return false
		}
		if n == 0 {
			head.EventTime, es.durable.EventTime = unixMicros(headAt), unixMicros(durAt)
			if head.Snapshot, err = cursor.ParseSnapshot(snapText); err != nil {
				yield(pgdcb.StoredEvent{}, errf("read", err))
				return false
			}
			if pf.exceeded(head) {
				return true
			}
		}
		n++
		if !ok { // no matching event: the header row alone
			break
		}
		last = ev
		if buf = append(buf, ev); len(buf) == cap(buf) && !flush() {
			return false
		}
	}
	if !flush() {
		return false
	}
	if err := rows.Err(); err != nil {
		yield(pgdcb.StoredEvent{}, errf("read", err))
		return false
	}
	if head.Snapshot == nil {
		yield(pgdcb.StoredEvent{}, errf("read", errors.New("no header row")))
		return false
	}
	es.head = pf.cursor(head)
	es.cursor = es.head
	if o.Limit > 0 && n >= o.Limit && !o.Backwards && last.Position != 0 {
		// Stopped by the limit: seen only up to the last event returned.
		es.cursor = pf.cursor(cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position,
			EventTime: eventTime(last.OccurredAt), Snapshot: head.Snapshot})
	}
	es.done = true
	return false
}

// rowTargets returns the scan targets of a read's rows, built once per read:
// first scans the header columns into hdr, rest discards them (nil), and
// each has room for the event's columns, which scanEventRow appends.
func rowTargets(hdr []any) (first, rest []any) {
	first = make([]any, len(hdr), len(hdr)+eventColumnCount)
	copy(first, hdr)
	rest = make([]any, len(hdr), len(hdr)+eventColumnCount)
	return first, rest
}

// eventColumnCount is the number of eventColumns, the columns scanEventRow
// scans after the header.
const eventColumnCount = 8

// scanEventRow scans one row of a read statement: its header columns into
// header (nil destinations discard them, as on every row after the first),
// then the event's columns. ok is false for the header-only row of a read
// that matched nothing.
func scanEventRow(rows pgx.Rows, header ...any) (ev pgdcb.StoredEvent, ok bool, err error) {
	var (
		pos  *int64
		txID *uint64
		typ  *string
		tgs  []string
		data []byte
		meta []byte
		id   pgtype.UUID
		at   pgtype.Timestamptz
	)
	if err := rows.Scan(append(header, &pos, &txID, &typ, &tgs, &data, &meta, &id, &at)...); err != nil {
		return pgdcb.StoredEvent{}, false, err
	}
	if pos == nil {
		return pgdcb.StoredEvent{}, false, nil
	}
	set, err := tags.ParseSet(tgs...)
	if err != nil {
		return pgdcb.StoredEvent{}, false, fmt.Errorf("stored tags: %w", err)
	}
	return pgdcb.StoredEvent{
		Event:         pgdcb.Event{Type: *typ, Tags: set, Data: data, Metadata: meta, ID: id.Bytes},
		Position:      *pos,
		TransactionID: *txID,
		OccurredAt:    at.Time,
	}, true, nil
}

// errReadTwice is the error of a second iteration of Events.All.
var errReadTwice = errors.New("pgdcb: read: Events.All iterated twice (read again instead)")
