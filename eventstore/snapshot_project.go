package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/horizon"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/query"
)

type projectOpts struct {
	save   bool // SaveSnapshot: write synchronously, whatever was folded
	noLoad bool // read from the start (after a stale load)
}

func anySnapshottable(projectors []pgdcb.Projector) bool {
	for _, p := range projectors {
		if sp, ok := p.(pgdcb.Snapshottable); ok {
			if name, _ := sp.SnapshotKey(); name != "" {
				return true
			}
		}
	}
	return false
}

// snapEntry is one snapshottable projector of a Project.
type snapEntry struct {
	p        pgdcb.Snapshottable
	name     string
	version  int
	qtext    string
	qkey     []byte
	from     cursor.Cursor // its events after this point are folded (Start: all)
	epoch    int64         // the loaded snapshot's epoch (when from is not Start)
	backup   []byte        // the state before the snapshot was decoded
	restored bool
	folded   int    // events folded at or before the durable point
	capture  []byte // the state at the durable point, when it is to be written
}

// loadSnapshots reads the stored snapshots of the entries' (name, query), all
// versions, whose point still names its event, in one statement.
func (s *Store) loadSnapshots(ctx context.Context, db dbtx, entries []*snapEntry) error {
	names := make([]string, len(entries))
	keys := make([][]byte, len(entries))
	for i, e := range entries {
		names[i], keys[i] = e.name, e.qkey
	}
	rows, err := db.Query(ctx, `SELECT k.name, k.query_key, k.version, k.transaction_id::text, k.position, k.state, k.epoch
		  FROM `+s.snap.snapshotsTable()+` k
		 WHERE (k.name, k.query_key) IN (SELECT * FROM unnest($1::text[], $2::bytea[]))
		   AND EXISTS (SELECT 1 FROM `+s.sql.events+` e WHERE e.position = k.position AND e.transaction_id = k.transaction_id)`,
		names, keys)
	if err != nil {
		return errf("load snapshots", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name, txText string
			qkey, state  []byte
			version      int64
			pos, epoch   int64
		)
		if err := rows.Scan(&name, &qkey, &version, &txText, &pos, &state, &epoch); err != nil {
			return errf("load snapshots", err)
		}
		tx, err := strconv.ParseUint(txText, 10, 64)
		if err != nil {
			return errf("load snapshots", err)
		}
		for _, e := range entries {
			if e.name != name || string(e.qkey) != string(qkey) {
				continue
			}
			if version != int64(e.version) {
				s.snap.ignoredVersion.Add(1)
				continue
			}
			if !e.from.IsStart() { // the same projector twice: keep the first
				continue
			}
			backup, err := e.p.MarshalState()
			if err != nil {
				return fmt.Errorf("pgdcb: project: marshal the initial state of %s: %w", e.name, err)
			}
			if err := e.p.UnmarshalState(state); err != nil {
				s.snap.ignoredCorrupt.Add(1)
				s.cfg.Logger.WarnContext(ctx, "pgdcb: decision snapshot ignored: does not decode", "model", name, "version", version, "err", err)
				continue
			}
			e.backup, e.from, e.epoch = backup, cursor.Cursor{TransactionID: tx, Position: pos}, epoch
		}
	}
	return errf("load snapshots", rows.Err())
}

// projectSnapshots is Project when some projector is Snapshottable.
func (s *Store) projectSnapshots(ctx context.Context, db dbtx, projectors []pgdcb.Projector, o projectOpts) (appendif.Condition, error) {
	if err := storekit.ValidateSnapshotKeys(projectors); err != nil {
		return appendif.Condition{}, err
	}
	var union query.Query
	queries := make([]query.Query, len(projectors))
	entryOf := make([]*snapEntry, len(projectors))
	var entries []*snapEntry
	for i, p := range projectors {
		queries[i] = s.expand(p.Query())
		union = union.Or(queries[i])
		if sp, ok := p.(pgdcb.Snapshottable); ok {
			if name, version := sp.SnapshotKey(); name != "" {
				text, key := s.snapshotKey(queries[i])
				e := &snapEntry{p: sp, name: name, version: version, qtext: text, qkey: key}
				entryOf[i] = e
				entries = append(entries, e)
			}
		}
	}
	if err := union.Validate(); err != nil {
		return appendif.Condition{}, err
	}
	if !o.noLoad {
		if err := s.loadSnapshots(ctx, db, entries); err != nil {
			if _, inTx := db.(pgx.Tx); inTx || ctx.Err() != nil {
				return appendif.Condition{}, err
			}
			// On the pool: read from the start (nothing was decoded before
			// the error, or it is restored below).
			s.snap.loadFailures.Add(1)
			s.cfg.Logger.WarnContext(ctx, "pgdcb: decision snapshots not loaded", "err", err)
			restore(entries)
		}
	}
	// Read after the earliest starting point of all projectors.
	after := entries[0].from
	for i := range projectors {
		f := cursor.Start
		if e := entryOf[i]; e != nil {
			f = e.from
		}
		if cursor.Compare(f.TransactionID, f.Position, after.TransactionID, after.Position) < 0 {
			after = f
		}
	}
	every := s.snap.snapshotEvery()
	c, writes, stale, err := s.foldFrom(ctx, db, s.proved(db), union, queries, projectors, entryOf, entries, after, every, o.save)
	if errors.Is(err, errProofExceeded) {
		// Past the standby proof's bounds (nothing was folded): the read
		// runs again on the primary.
		c, writes, stale, err = s.foldFrom(ctx, s.pool, false, union, queries, projectors, entryOf, entries, after, every, o.save)
	}
	if err != nil {
		return appendif.Condition{}, err
	}
	if stale {
		// Retention ran between the load and the read: the loaded states
		// may hold deleted events. Start again from the initial states.
		s.snap.ignoredStale.Add(1)
		if err := restore(entries); err != nil {
			return appendif.Condition{}, err
		}
		o.noLoad = true
		return s.projectSnapshots(ctx, db, projectors, o)
	}
	for _, e := range entries {
		if !e.from.IsStart() {
			s.snap.loaded.Add(1)
		}
	}
	if o.save {
		var errs []error
		for _, w := range writes {
			ok, err := s.snap.writeSnapshot(ctx, w)
			s.snap.recordWrite(ctx, ok, err)
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return appendif.Condition{}, err
		}
	} else {
		for _, w := range writes {
			s.snap.scheduleSnapshotWrite(ctx, w)
		}
	}
	return appendif.FailIf(union, &c), nil
}

// restore puts back the state each entry had before its snapshot was decoded.
func restore(entries []*snapEntry) error {
	for _, e := range entries {
		if e.backup != nil && !e.restored {
			if err := e.p.UnmarshalState(e.backup); err != nil {
				return fmt.Errorf("pgdcb: project: restore the initial state of %s: %w", e.name, err)
			}
			e.restored = true
		}
		e.from, e.backup, e.folded, e.capture = cursor.Start, nil, 0, nil
	}
	return nil
}

// snapshotReadSQL is readSQL's decision read (one statement, one snapshot)
// with, in its header, the durable point (the last event of the log below the
// horizon, as a tailing read finds it: internal/horizon) and the retention
// epoch.
func (s *Store) snapshotReadSQL(q query.Query, after cursor.Cursor, proved bool) (string, args) {
	var a args
	where := whereQuery(q, &a)
	if !after.IsStart() {
		where += " AND " + whereNotSeen(after, &a)
	}
	proven, provenSQL := "", ""
	if proved {
		proven, provenSQL = s.proofSQL(true, "s.snap", a.add(s.proofArg()))
	}
	return `SELECT s.snap::text, s.epoch, coalesce(h.transaction_id, '0'), coalesce(h.position, 0), h.occurred_at,
			coalesce(d.transaction_id, '0'), coalesce(d.position, 0)` + proven + `, r.*
		FROM (SELECT pg_current_snapshot() AS snap,
				(SELECT epoch FROM ` + s.schema + `.decision_snapshot_epoch) AS epoch) s
		LEFT JOIN LATERAL (SELECT transaction_id, position, occurred_at FROM ` + s.sql.events + `
			ORDER BY transaction_id DESC, position DESC LIMIT 1) h ON true` + horizon.Join("s.snap", "h.transaction_id") + `
		LEFT JOIN LATERAL (SELECT transaction_id, position FROM ` + s.sql.events + `
			WHERE transaction_id < hz.horizon
			ORDER BY transaction_id DESC, position DESC LIMIT 1) d ON true` + provenSQL + `
		LEFT JOIN LATERAL (SELECT ` + s.sql.eventCols + ` FROM ` + s.sql.events + ` e
			WHERE ` + where + `
			ORDER BY e.transaction_id, e.position) r ON true`, a
}

// foldFrom reads the union after the cursor and folds each event into every
// projector whose query matches it and whose starting point it is after. At
// the durable point it captures the states to write. stale reports that a
// loaded snapshot's epoch is not the read's (nothing was folded then). It
// returns errProofExceeded, having folded nothing, when the read is proved
// and its proof is past its bounds (proof.exceeded).
func (s *Store) foldFrom(ctx context.Context, db dbtx, proved bool, union query.Query, queries []query.Query, projectors []pgdcb.Projector,
	entryOf []*snapEntry, entries []*snapEntry, after cursor.Cursor, every int, save bool) (c cursor.Cursor, writes []*snapshotWrite, stale bool, err error) {
	sql, a := s.snapshotReadSQL(union, after, proved)
	rows, err := readQuery(ctx, db, true, false, sql, a...)
	if err != nil {
		return c, nil, false, errf("project", err)
	}
	defer rows.Close()
	var (
		snapText       string
		epoch          int64
		head, durable  cursor.Cursor
		n              int
		passedDurable  bool
		captureFailure error
		traced         = s.traceOf(ctx)
		pf             = s.newProof(proved)
	)
	capture := func() {
		passedDurable = true
		if durable.TransactionID == 0 {
			return
		}
		for _, e := range entries {
			if cursor.Compare(durable.TransactionID, durable.Position, e.from.TransactionID, e.from.Position) <= 0 {
				continue // nothing new below the horizon
			}
			if !save && (every == 0 || e.folded < every) {
				continue
			}
			b, err := e.p.MarshalState()
			if err != nil {
				captureFailure = fmt.Errorf("pgdcb: snapshot of %s: marshal: %w", e.name, err)
				continue
			}
			writes = append(writes, &snapshotWrite{name: e.name, version: e.version, qtext: e.qtext, qkey: e.qkey,
				tx: durable.TransactionID, position: durable.Position, state: b, epoch: epoch})
		}
	}
	// fold hands one event to the projectors; events are folded in
	// batches, each through the read pipeline (present) first.
	fold := func(ev pgdcb.StoredEvent) {
		below := cursor.Compare(ev.TransactionID, ev.Position, durable.TransactionID, durable.Position) <= 0
		if !below && !passedDurable {
			capture()
		}
		for i, p := range projectors {
			if !queries[i].Matches(ev.Type, ev.Tags) {
				continue
			}
			e := entryOf[i]
			if e != nil && cursor.Compare(ev.TransactionID, ev.Position, e.from.TransactionID, e.from.Position) <= 0 {
				continue // in its snapshot
			}
			p.Apply(ev)
			if e != nil && below {
				e.folded++
			}
		}
	}
	buf := make([]pgdcb.StoredEvent, 0, presentBatch)
	flush := func() error {
		if err := s.present(ctx, buf); err != nil {
			return err
		}
		for _, ev := range buf {
			fold(ev)
		}
		buf = buf[:0]
		return nil
	}
	var headAt pgtype.Timestamptz
	first, rest := rowTargets(append([]any{&snapText, &epoch, &head.TransactionID, &head.Position, &headAt,
		&durable.TransactionID, &durable.Position}, pf.dest()...))
	for rows.Next() {
		targets := rest
		if n == 0 {
			targets = first
		}
		ev, ok, err := scanEventRow(rows, targets...)
		if err != nil {
			return c, nil, false, errf("project", err)
		}
		if n == 0 {
			for _, e := range entries {
				if !e.from.IsStart() && e.epoch != epoch {
					return c, nil, true, nil
				}
			}
			head.EventTime = unixMicros(headAt)
			if head.Snapshot, err = cursor.ParseSnapshot(snapText); err != nil {
				return c, nil, false, errf("project", err)
			}
			if pf.exceeded(head) {
				return c, nil, false, errProofExceeded
			}
		}
		n++
		if !ok {
			break
		}
		traced.addEvents(1)
		if buf = append(buf, ev); len(buf) == cap(buf) {
			if err := flush(); err != nil {
				return c, nil, false, err
			}
		}
	}
	if err := flush(); err != nil {
		return c, nil, false, err
	}
	if err := rows.Err(); err != nil {
		return c, nil, false, errf("project", err)
	}
	if !passedDurable {
		capture()
	}
	if head.Snapshot == nil {
		return c, nil, false, errf("project", errors.New("no header row"))
	}
	head = pf.cursor(head)
	if captureFailure != nil {
		if save {
			return c, nil, false, captureFailure
		}
		s.snap.writeFailures.Add(1)
		s.cfg.Logger.WarnContext(ctx, "pgdcb: decision snapshot not written", "err", captureFailure)
	}
	return head, writes, false, nil
}
