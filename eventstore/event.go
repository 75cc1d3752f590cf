package eventstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Event is an event to append.
type Event struct {
	// Type names what happened: 1..64 bytes.
	Type string
	// Tags identify what the event is about (the consistency boundary).
	Tags tags.Set
	// Data is the JSON payload, opaque to the store. Required.
	Data json.RawMessage
	// Metadata is optional JSON (correlation id, causation id, …).
	Metadata json.RawMessage
	// ID is an optional client-chosen id; appending an id that is already stored
	// fails with ErrIdempotent, which makes blind retries safe. uuid.Nil: none.
	ID uuid.UUID
}

// NewEvent builds an event, marshalling data to JSON and parsing the tags.
func NewEvent(eventType string, data any, tagStrings ...string) (Event, error) {
	ts, err := tags.ParseSet(tagStrings...)
	if err != nil {
		return Event{}, err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, &InvalidEventError{Type: eventType, Reason: "data: " + err.Error()}
	}
	return Event{Type: eventType, Tags: ts, Data: raw}, nil
}

// MustEvent is NewEvent that panics on error; for tests and examples.
func MustEvent(eventType string, data any, tagStrings ...string) Event {
	e, err := NewEvent(eventType, data, tagStrings...)
	if err != nil {
		panic(err)
	}
	return e
}

// StoredEvent is an event read from the log.
type StoredEvent struct {
	Event
	// Position is unique and increases within a transaction.
	Position int64
	// TransactionID is the xid8 of the transaction that appended the event. The
	// log's order is (TransactionID, Position).
	TransactionID uint64
	OccurredAt    time.Time
}

// InvalidEventError names the event that was refused and why. Nothing of its
// batch was written.
type InvalidEventError struct {
	Index  int // place in the batch; -1 for the batch as a whole
	Type   string
	Reason string
}

func (e *InvalidEventError) Error() string {
	if e.Index < 0 {
		return "pgdcb: invalid batch: " + e.Reason
	}
	return fmt.Sprintf("pgdcb: invalid event %d (type %q): %s", e.Index, e.Type, e.Reason)
}

// Is makes errors.Is(err, pgdcb.ErrInvalidEvent) true.
func (e *InvalidEventError) Is(target error) bool { return target == pgdcb.ErrInvalidEvent }

func (s *Store) validate(events []Event) error {
	if len(events) == 0 {
		return &InvalidEventError{Index: -1, Reason: "no events"}
	}
	if len(events) > s.cfg.MaxBatchSize {
		return &InvalidEventError{Index: -1, Reason: fmt.Sprintf("%d events, more than MaxBatchSize %d", len(events), s.cfg.MaxBatchSize)}
	}
	seen := make(map[uuid.UUID]int)
	for i, e := range events {
		if err := query.ValidateType(e.Type); err != nil {
			return &InvalidEventError{Index: i, Type: e.Type, Reason: err.Error()}
		}
		if len(e.Data) == 0 {
			return &InvalidEventError{Index: i, Type: e.Type, Reason: "data is empty (use {} or null for no payload)"}
		}
		if !json.Valid(e.Data) {
			return &InvalidEventError{Index: i, Type: e.Type, Reason: "data is not valid JSON"}
		}
		if len(e.Metadata) > 0 && !json.Valid(e.Metadata) {
			return &InvalidEventError{Index: i, Type: e.Type, Reason: "metadata is not valid JSON"}
		}
		if e.ID != uuid.Nil {
			if j, dup := seen[e.ID]; dup {
				return &InvalidEventError{Index: i, Type: e.Type, Reason: fmt.Sprintf("event id %s repeats event %d of the batch", e.ID, j)}
			}
			seen[e.ID] = i
		}
	}
	return nil
}
