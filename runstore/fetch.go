package runstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// FetchEvents implements StateStore: the run's events after opts.AfterSeq in
// runSeq order. A watermark reader (AfterSeq = last runSeq it saw) never
// observes a gap that is filled later: see docs/RUNSTORE.md.
func (s *Store) FetchEvents(ctx context.Context, runID string, opts *FetchOptions) ([]CanonicalEngineEvent, error) {
	t := s.cfg.Tracer
	if t == nil {
		return s.fetchEvents(ctx, runID, opts)
	}
	var o FetchOptions
	if opts != nil {
		o = *opts
	}
	start := time.Now()
	ctx = t.TraceRunFetchStart(ctx, TraceData{RunID: runID, Opts: o})
	evs, err := s.fetchEvents(ctx, runID, opts)
	t.TraceRunFetchEnd(ctx, TraceData{RunID: runID, Opts: o, Events: len(evs), Duration: time.Since(start), Err: err})
	return evs, err
}

// fetchEvents is FetchEvents, untraced.
func (s *Store) fetchEvents(ctx context.Context, runID string, opts *FetchOptions) ([]CanonicalEngineEvent, error) {
	o, err := validateFetch(runID, opts, s.cfg.MaxFetchLimit)
	if err != nil {
		return nil, err
	}
	return s.fetch(ctx, s.es.Pool(), runID, o.AfterSeq, o.Limit)
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// fetch reads a page of the run (validated arguments) on db.
func (s *Store) fetch(ctx context.Context, db querier, runID string, afterSeq int64, limit int) ([]CanonicalEngineEvent, error) {
	rows, err := db.Query(ctx, s.sql.fetch, runID, afterSeq, limit)
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: runstore: fetch events: %w", err)
	}
	defer rows.Close()
	out := make([]CanonicalEngineEvent, 0, min(limit, 256))
	for rows.Next() {
		var (
			data []byte
			at   time.Time
		)
		if err := rows.Scan(&data, &at); err != nil {
			return nil, errfmt.Errorf("pgdcb: runstore: fetch events: %w", err)
		}
		ev, err := decodeEvent(data, at)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, errfmt.Errorf("pgdcb: runstore: fetch events: %w", err)
	}
	return out, nil
}

// decodeEvent turns a stored event's data back into the contract's event.
func decodeEvent(data []byte, persisted time.Time) (CanonicalEngineEvent, error) {
	var ev CanonicalEngineEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return ev, fmt.Errorf("%w: %v", ErrCorruptEvent, err)
	}
	ev.PersistedAt = persisted.UTC().Format(time.RFC3339Nano)
	return ev, nil
}
