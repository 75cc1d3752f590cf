package eventstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// ReadTail reads up to limit events matching q after the cursor, only from
// transactions older than every running one of this database, so an event
// that commits later never lands behind the returned cursor. A long-running
// transaction of this database that holds a transaction id (or one whose
// database the server does not show) holds the horizon back and delays
// tailing readers; it never makes them skip an event. Transactions of other
// databases of the cluster do not delay them (docs/CONCURRENCY.md, "The
// tailing horizon"). A limit of 0 means no limit; a
// negative limit is refused (pgdcb.ErrInvalidArgument).
//
// Subscriptions, projections and the outbox are built on it.
func (s *Store) ReadTail(ctx context.Context, q query.Query, after cursor.Cursor, limit int) (pgdcb.TailBatch, error) {
	return s.readTail(ctx, s.ReadPool(), q, TailOptions{After: after, Limit: limit})
}

// TailOptions are the options of ReadTailWith.
type TailOptions struct {
	// After is the cursor to read after (cursor.Start: from the beginning).
	After cursor.Cursor
	// Limit is the most events returned; 0 means no limit.
	Limit int
	// MetadataContains, when set, narrows the read to events whose metadata
	// contains this JSON object (jsonb @>), on top of the query; see
	// ReadOptions.MetadataContains. The cursor rules are those of ReadTail:
	// a short page still moves the cursor to the last event of the whole log
	// below the horizon, whatever it matches.
	MetadataContains json.RawMessage
}

// ReadTailWith is ReadTail with options: a reader of a part of the log that
// no query of types and tags names (runstore's snapshot projector reads the
// events carrying its metadata marker) follows it with the same horizon and
// cursor rules.
func (s *Store) ReadTailWith(ctx context.Context, q query.Query, opts TailOptions) (pgdcb.TailBatch, error) {
	return s.readTail(ctx, s.ReadPool(), q, opts)
}

// ReadTailWithTx is ReadTailWith in the caller's transaction (see
// ReadTailTx).
func (s *Store) ReadTailWithTx(ctx context.Context, tx pgx.Tx, q query.Query, opts TailOptions) (pgdcb.TailBatch, error) {
	return s.readTail(ctx, tx, q, opts)
}

// ReadTailTx is ReadTail in the caller's transaction. Read before the
// transaction's first write: once it has a transaction id, it holds the horizon
// below its own writes.
func (s *Store) ReadTailTx(ctx context.Context, tx pgx.Tx, q query.Query, after cursor.Cursor, limit int) (pgdcb.TailBatch, error) {
	return s.readTail(ctx, tx, q, TailOptions{After: after, Limit: limit})
}

func (s *Store) readTail(ctx context.Context, db dbtx, q query.Query, opts TailOptions) (_ pgdcb.TailBatch, err error) {
	after, limit := opts.After, opts.Limit
	ctx, t := s.startRead(ctx, ReadOpReadTail, q, db)
	defer func() { t.endRead(ReadOpReadTail, err) }()
	if limit < 0 {
		return pgdcb.TailBatch{}, &pgdcb.InvalidArgumentError{Name: "ReadTail limit",
			Reason: fmt.Sprintf("must not be negative (got %d; 0 means no limit)", limit)}
	}
	after.Snapshot = nil // tailing is by log order only
	es := s.readMode(ctx, db, q, &pgdcb.ReadOptions{After: &after, Limit: limit, MetadataContains: opts.MetadataContains}, true)
	evs, _, err := collect(es)
	if err != nil {
		return pgdcb.TailBatch{}, err
	}
	b := pgdcb.TailBatch{Events: evs, Horizon: es.horizon, Head: es.head,
		HorizonHolder: pgdcb.HorizonHolder{PID: es.holder.PID, Database: es.holder.Database}}
	b.Head.Snapshot = nil
	if limit > 0 && len(evs) == limit {
		// Possibly more to come: continue after the last event delivered.
		last := evs[len(evs)-1]
		b.Cursor = cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position, EventTime: eventTime(last.OccurredAt)}
		return b, nil
	}
	// Every matching event below the horizon after the cursor was delivered,
	// so the cursor may move to the last event below the horizon, whatever it
	// matches. Not further: a transaction id between that event and the
	// horizon may have written nothing durable (a NOTIFY, a rollback, a
	// read-only transaction that took an id) and be handed out again after a
	// crash or a failover; its events must sort after the cursor. The durable
	// point is at or after every delivered event.
	b.Cursor = after
	if d := es.durable; cursor.Compare(d.TransactionID, d.Position, after.TransactionID, after.Position) > 0 {
		b.Cursor = d
	}
	return b, nil
}
