package memstore

import (
	"context"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/query"
)

// Read returns the events matching q in log order (see
// eventstore.Store.Read), all from one snapshot taken when All is first
// iterated.
func (s *Store) Read(ctx context.Context, q query.Query, opts *pgdcb.ReadOptions) pgdcb.Events {
	var o pgdcb.ReadOptions
	if opts != nil {
		o = *opts
	}
	return pgdcb.NewEvents(func() ([]pgdcb.StoredEvent, cursor.Cursor, error) {
		return s.read(ctx, q, o)
	})
}

func (s *Store) read(ctx context.Context, q query.Query, o pgdcb.ReadOptions) ([]pgdcb.StoredEvent, cursor.Cursor, error) {
	if err := q.Validate(); err != nil {
		return nil, cursor.Cursor{}, err
	}
	if o.Limit < 0 {
		return nil, cursor.Cursor{}, invalidLimit("ReadOptions.Limit", o.Limit)
	}
	if err := ctx.Err(); err != nil {
		return nil, cursor.Cursor{}, errfmt.Errorf("pgdcb: read: %w", err)
	}
	s.mu.RLock()
	out, c, _ := s.readLocked(q, o)
	s.mu.RUnlock()
	if err := s.present(ctx, out); err != nil {
		return nil, cursor.Cursor{}, err
	}
	return out, c, nil
}

// readLocked is read under s.mu; it also returns the log's head at the read.
// Its events are as stored: pass them through present.
func (s *Store) readLocked(q query.Query, o pgdcb.ReadOptions) ([]pgdcb.StoredEvent, cursor.Cursor, cursor.Cursor) {
	q = storekit.Expand(s.upcasters, q)
	head := s.headLocked()
	var out []pgdcb.StoredEvent
	s.scan(q, o.After, o.Backwards, func(e pgdcb.StoredEvent) bool {
		out = append(out, clone(e))
		return o.Limit == 0 || len(out) < o.Limit
	})
	c := head
	if o.Limit > 0 && len(out) >= o.Limit && !o.Backwards {
		// Stopped by the limit: seen only up to the last event returned.
		last := out[len(out)-1]
		c = cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position, Snapshot: head.Snapshot}
	}
	return out, c, head
}

// ReadAll reads every matching event into memory and returns them with the
// decision cursor (see eventstore.Store.ReadAll).
func (s *Store) ReadAll(ctx context.Context, q query.Query, opts *pgdcb.ReadOptions) ([]pgdcb.StoredEvent, cursor.Cursor, error) {
	var o pgdcb.ReadOptions
	if opts != nil {
		o = *opts
	}
	return s.read(ctx, q, o)
}

// ReadLast returns the last event matching q (nil if none) and the decision
// cursor (see eventstore.Store.ReadLast).
func (s *Store) ReadLast(ctx context.Context, q query.Query) (*pgdcb.StoredEvent, cursor.Cursor, error) {
	evs, c, err := s.read(ctx, q, pgdcb.ReadOptions{Limit: 1, Backwards: true})
	if err != nil || len(evs) == 0 {
		return nil, c, err
	}
	return &evs[0], c, nil
}

// Head returns a cursor at the end of the log carrying a snapshot of now (see
// eventstore.Store.Head).
func (s *Store) Head(ctx context.Context) (cursor.Cursor, error) {
	if err := ctx.Err(); err != nil {
		return cursor.Cursor{}, errfmt.Errorf("pgdcb: head: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.headLocked(), nil
}

// Project reads the union of the projectors' queries in one snapshot and
// hands each event to every projector whose query matches it (see
// eventstore.Store.Project). Snapshottable models are folded from the start:
// the state and the condition are those the PostgreSQL store returns.
func (s *Store) Project(ctx context.Context, projectors ...pgdcb.Projector) (appendif.Condition, error) {
	return storekit.Fold(func(q query.Query) pgdcb.Events { return s.Read(ctx, q, nil) }, s.upcasters, projectors...)
}

// ReadTail reads up to limit events matching q after the cursor (see
// eventstore.Store.ReadTail). Nothing is ever in flight, so the horizon is
// the next transaction id and every stored event is delivered.
func (s *Store) ReadTail(ctx context.Context, q query.Query, after cursor.Cursor, limit int) (pgdcb.TailBatch, error) {
	if limit < 0 {
		return pgdcb.TailBatch{}, invalidLimit("ReadTail limit", limit)
	}
	after.Snapshot = nil // tailing is by log order only
	o := pgdcb.ReadOptions{After: &after, Limit: limit}
	if err := q.Validate(); err != nil {
		return pgdcb.TailBatch{}, err
	}
	if err := ctx.Err(); err != nil {
		return pgdcb.TailBatch{}, errfmt.Errorf("pgdcb: read: %w", err)
	}
	s.mu.RLock()
	// The head is the log's last event, whatever the limit cut the page to.
	evs, _, head := s.readLocked(q, o)
	s.mu.RUnlock()
	if err := s.present(ctx, evs); err != nil {
		return pgdcb.TailBatch{}, err
	}
	b := pgdcb.TailBatch{Events: evs, Horizon: head.Snapshot.Xmin, Head: head}
	b.Head.Snapshot = nil
	if limit > 0 && len(evs) == limit {
		last := evs[len(evs)-1]
		b.Cursor = cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}
		return b, nil
	}
	// Everything matching was delivered: move to the log's last event (every
	// event is durable and below the horizon), never back.
	b.Cursor = after
	if cursor.Compare(b.Head.TransactionID, b.Head.Position, after.TransactionID, after.Position) > 0 {
		b.Cursor = b.Head
	}
	return b, nil
}
