package runstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// FetchEvents implements StateStore: the run's events after opts.AfterSeq in
// runSeq order. A watermark reader (AfterSeq = last runSeq it saw) never
// observes a gap that is filled later: see docs/RUNSTORE.md.
func (s *Store) FetchEvents(ctx context.Context, runID string, opts *FetchOptions) ([]CanonicalEngineEvent, error) {
	o := FetchOptions{Limit: DefaultFetchLimit}
	if opts != nil {
		o = *opts
	}
	if err := validateRunID(runID); err != nil {
		return nil, err
	}
	if o.AfterSeq < 0 {
		return nil, invalid("afterSeq", "must be >= 0, got %d", o.AfterSeq)
	}
	if o.Limit <= 0 || o.Limit > s.cfg.MaxFetchLimit {
		return nil, invalid("limit", "must be 1..%d, got %d", s.cfg.MaxFetchLimit, o.Limit)
	}
	rows, err := s.es.Pool().Query(ctx, s.sql.fetch, runID, o.AfterSeq, o.Limit)
	if err != nil {
		return nil, fmt.Errorf("runstore: fetch events: %w", err)
	}
	defer rows.Close()
	out := make([]CanonicalEngineEvent, 0, min(o.Limit, 256))
	for rows.Next() {
		var (
			data []byte
			at   time.Time
		)
		if err := rows.Scan(&data, &at); err != nil {
			return nil, fmt.Errorf("runstore: fetch events: %w", err)
		}
		ev, err := decodeEvent(data, at)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runstore: fetch events: %w", err)
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
