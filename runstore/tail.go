package runstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/horizon"
)

// The snapshot projector's reads of the log. They read run events only
// (the marker predicate, served by the partial index events_runstore_log_order
// of runstore/migrations/001_runstore.sql), never the rest of the schema's traffic: eventstore's
// ReadTail cannot filter by metadata, and through it the projector read, sent
// and decoded every event of the store. Both follow the event store's cursor
// rules (docs/CONCURRENCY.md), restricted to run events:
//
//   - runTail is eventstore.ReadTail: only transactions below the horizon
//     (internal/horizon), and a short page moves the cursor to the last event
//     of the whole log below the horizon (an event that exists, so no
//     transaction id a crash can hand out again sorts at or before it);
//   - runAhead is a forward eventstore.Read with a decision cursor: the
//     committed run events the cursor has not seen ((tx, position) after it,
//     or in a transaction it saw in progress), and a cursor at the head of
//     the log with the read's snapshot (at its last event when the page is
//     full).

// runRow is a run event with its place in the log.
type runRow struct {
	tx  uint64
	pos int64
	ev  CanonicalEngineEvent
}

// runPage is one page of run events and what the statement saw of the log.
type runPage struct {
	rows []runRow
	// cursor to continue from (see runTail, runAhead).
	cursor cursor.Cursor
	// horizon is the read's horizon (runTail; internal/horizon).
	horizon uint64
	// head is the last event of the whole log visible to the read.
	head cursor.Cursor
}

// readRunTail reads up to limit run events after the checkpoint below the
// horizon (see eventstore.ReadTail): read it before the transaction's first
// write.
func (s *Store) readRunTail(ctx context.Context, tx pgx.Tx, after cursor.Cursor, limit int) (runPage, error) {
	rows, err := horizon.Query(ctx, tx, s.sql.runTail, after.TransactionID, after.Position, limit)
	if err != nil {
		return runPage{}, fmt.Errorf("runstore: projector read: %w", err)
	}
	var (
		page     runPage
		snapText string
		durable  cursor.Cursor
	)
	page.rows, err = scanRunRows(rows, &snapText, &page.head.TransactionID, &page.head.Position,
		&durable.TransactionID, &durable.Position, &page.horizon)
	if err != nil {
		return runPage{}, fmt.Errorf("runstore: projector read: %w", err)
	}
	switch {
	case len(page.rows) == limit:
		last := page.rows[len(page.rows)-1]
		page.cursor = cursor.Cursor{TransactionID: last.tx, Position: last.pos}
	case cursor.Compare(durable.TransactionID, durable.Position, after.TransactionID, after.Position) > 0:
		page.cursor = durable
	default:
		page.cursor = after
	}
	page.cursor.Snapshot = nil
	return page, nil
}

// readRunAhead reads up to limit committed run events that from has not seen
// (from carries its read's snapshot) and returns them with the cursor to
// continue from.
func (s *Store) readRunAhead(ctx context.Context, tx pgx.Tx, from cursor.Cursor, limit int) (runPage, error) {
	xip := []uint64{}
	if from.Snapshot != nil {
		xip = from.Snapshot.Xip
	}
	rows, err := tx.Query(ctx, s.sql.runAhead, from.TransactionID, from.Position, xip, limit)
	if err != nil {
		return runPage{}, fmt.Errorf("runstore: projector read beyond the horizon: %w", err)
	}
	var (
		page     runPage
		snapText string
	)
	page.rows, err = scanRunRows(rows, &snapText, &page.head.TransactionID, &page.head.Position)
	if err != nil {
		return runPage{}, fmt.Errorf("runstore: projector read beyond the horizon: %w", err)
	}
	snap, err := cursor.ParseSnapshot(snapText)
	if err != nil {
		return runPage{}, fmt.Errorf("runstore: projector read beyond the horizon: %w", err)
	}
	page.cursor = page.head
	if len(page.rows) == limit {
		// Stopped by the limit: seen only up to the last event read.
		last := page.rows[len(page.rows)-1]
		page.cursor = cursor.Cursor{TransactionID: last.tx, Position: last.pos}
	}
	page.cursor.Snapshot = snap
	return page, nil
}

// scanRunRows scans the rows of runTail or runAhead: the header columns
// (repeated on every row) into header from the first row, then each run
// event. A read that matched nothing has the header row alone.
func scanRunRows(rows pgx.Rows, header ...any) ([]runRow, error) {
	defer rows.Close()
	var out []runRow
	first := true
	for rows.Next() {
		dest := make([]any, len(header), len(header)+4) // nil: discarded
		if first {
			copy(dest, header)
		}
		first = false
		var (
			tx   *uint64
			pos  *int64
			data []byte
			at   *time.Time
		)
		if err := rows.Scan(append(dest, &tx, &pos, &data, &at)...); err != nil {
			return nil, err
		}
		if pos == nil {
			break // no event: the header row alone
		}
		ev, err := decodeEvent(data, *at)
		if err != nil {
			return nil, fmt.Errorf("event at %d: %w", *pos, err)
		}
		out = append(out, runRow{tx: *tx, pos: *pos, ev: ev})
	}
	return out, rows.Err()
}
