package eventstore

import (
	"context"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// TailBatch is one page of a tailing read.
type TailBatch struct {
	// Events matching the query after the cursor, in log order.
	Events []StoredEvent
	// Cursor to continue from: the last event delivered when the limit was
	// reached, else the horizon (everything before it was delivered). It carries
	// no snapshot and is safe as an AppendIf After by plain log order.
	Cursor cursor.Cursor
	// Horizon is the oldest transaction id still running when the page was read
	// (pg_snapshot_xmin): no event at or above it was delivered.
	Horizon uint64
	// Head is the last event in log order visible when the page was read.
	Head cursor.Cursor
}

// ReadTail reads up to limit events matching q after the cursor, only from
// transactions older than every running one, so an event that commits later
// never lands behind the returned cursor. A long-running write transaction (in
// any database of the cluster) holds the horizon back and delays tailing
// readers; it never makes them skip an event.
//
// Subscriptions, projections and the outbox are built on it.
func (s *Store) ReadTail(ctx context.Context, q query.Query, after cursor.Cursor, limit int) (TailBatch, error) {
	return s.readTail(ctx, s.pool, q, after, limit)
}

// ReadTailTx is ReadTail in the caller's transaction. Read before the
// transaction's first write: once it has a transaction id, it holds the horizon
// below its own writes.
func (s *Store) ReadTailTx(ctx context.Context, tx pgx.Tx, q query.Query, after cursor.Cursor, limit int) (TailBatch, error) {
	return s.readTail(ctx, tx, q, after, limit)
}

func (s *Store) readTail(ctx context.Context, db dbtx, q query.Query, after cursor.Cursor, limit int) (TailBatch, error) {
	after.Snapshot = nil // tailing is by log order only
	es := s.readMode(ctx, db, q, &ReadOptions{After: &after, Limit: limit}, true)
	evs, head, err := collect(es)
	if err != nil {
		return TailBatch{}, err
	}
	b := TailBatch{Events: evs, Horizon: head.Snapshot.Xmin, Head: head}
	b.Head.Snapshot = nil
	switch {
	case limit > 0 && len(evs) == limit:
		last := evs[len(evs)-1]
		b.Cursor = cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}
	case b.Horizon > 0 && b.Horizon-1 > after.TransactionID:
		// Every transaction below the horizon has ended and its matching
		// events were delivered: move past all of them.
		b.Cursor = cursor.Cursor{TransactionID: b.Horizon - 1, Position: math.MaxInt64}
	default:
		b.Cursor = after
	}
	return b, nil
}
