package eventstore

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/pgjson"
	"github.com/pgdcb/pgdcb/query"
)

// validate checks a batch in Go before anything is sent (see ValidateEvents).
func (s *Store) validate(events []pgdcb.Event) error { return ValidateEvents(s.cfg, events) }

// ValidateEvents checks a batch as Append does before anything is sent: every
// string the server would refuse (invalid UTF-8, NUL), every JSON text jsonb
// would refuse (see package internal/pgjson), the sizes against cfg's limits
// (cfg as ResolveConfig returns it), duplicate event ids. It fails with an
// *InvalidEventError. For implementers of Interface, which must refuse what
// the PostgreSQL store refuses (see the package documentation, "Implementing
// Interface").
func ValidateEvents(cfg Config, events []pgdcb.Event) error {
	if len(events) == 0 {
		return &pgdcb.InvalidEventError{Index: -1, Field: "batch", Reason: "no events"}
	}
	if len(events) > cfg.MaxBatchSize {
		return &pgdcb.InvalidEventError{Index: -1, Field: "batch", Reason: fmt.Sprintf("%d events, more than MaxBatchSize %d", len(events), cfg.MaxBatchSize)}
	}
	// Sizes first: cheap, and a 50 MB payload is refused before it is read.
	total := 0
	for i, e := range events {
		if err := query.ValidateType(e.Type); err != nil {
			reason := err.Error()
			if te, ok := err.(*query.InvalidTypeError); ok {
				reason = te.Reason
			}
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "type", Reason: reason}
		}
		size := e.Size()
		if size > cfg.MaxEventBytes {
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "size", Reason: fmt.Sprintf(
				"%d bytes (type, tags, data and metadata), more than MaxEventBytes %d", size, cfg.MaxEventBytes)}
		}
		total += size
		if total > cfg.MaxBatchBytes {
			return &pgdcb.InvalidEventError{Index: -1, Field: "batch", Reason: fmt.Sprintf(
				"more than MaxBatchBytes %d bytes (type, tags, data and metadata of its events; %d by event %d)",
				cfg.MaxBatchBytes, total, i)}
		}
	}
	var seen map[uuid.UUID]int
	for i, e := range events {
		if len(e.Data) == 0 {
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "data", Reason: "empty (use {} or null for no payload)"}
		}
		if err := pgjson.Validate(e.Data); err != nil {
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "data", Reason: "not valid JSON for PostgreSQL's jsonb: " + err.Error()}
		}
		if len(e.Metadata) > 0 {
			if err := pgjson.Validate(e.Metadata); err != nil {
				return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "metadata", Reason: "not valid JSON for PostgreSQL's jsonb: " + err.Error()}
			}
		}
		if e.ID != uuid.Nil {
			if seen == nil {
				seen = make(map[uuid.UUID]int)
			}
			if j, dup := seen[e.ID]; dup {
				return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "id", Reason: fmt.Sprintf("event id %s repeats event %d of the batch", e.ID, j)}
			}
			seen[e.ID] = i
		}
	}
	return nil
}
