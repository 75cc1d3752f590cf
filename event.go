package pgdcb

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/tags"
)

// Event is an event to append.
type Event struct {
	// Type names what happened: 1..64 bytes of UTF-8 without NUL.
	Type string
	// Tags identify what the event is about (the consistency boundary).
	Tags tags.Set
	// Data is the JSON payload, opaque to the store. Required. It must be
	// JSON that PostgreSQL's jsonb accepts (no \u0000, no lone surrogate,
	// valid UTF-8, numbers within numeric's range) and nest at most 512 deep;
	// the append checks it before sending anything.
	Data json.RawMessage
	// Metadata is optional JSON (correlation id, causation id, …), with
	// Data's rules.
	Metadata json.RawMessage
	// ID is an optional client-chosen id; appending an id that is already stored
	// fails with ErrIdempotent, which makes blind retries safe. uuid.Nil: none.
	//
	// Append and AppendIf on the pool give the first event of a call that has
	// none an id of their own (a UUIDv7), by which they settle a call whose
	// connection is lost (docs/FAULTS.md, "Settled outcomes"): read back, the
	// first event of each such call carries it. Not with
	// Config.SettleDisabled, and never in AppendTx / AppendIfTx.
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
		return Event{}, &InvalidEventError{Type: eventType, Field: "data", Reason: err.Error()}
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

// InvalidEventError names the event that was refused, the field and why.
// Nothing of its batch was written. Error() cuts what it repeats of the
// input to a few hundred bytes; the fields hold it whole.
type InvalidEventError struct {
	// Index is the event's place in the batch; -1 for the batch as a whole.
	Index int
	// Type is the event's type as given.
	Type string
	// Field names what was refused: "type", "size" (the event's bytes, see
	// Config.MaxEventBytes), "data", "metadata" or "id"; for the batch
	// (Index -1) "batch".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *InvalidEventError) Error() string {
	field := ""
	if e.Field != "" {
		field = e.Field + ": "
	}
	if e.Index < 0 {
		return "pgdcb: invalid batch: " + field + clip.Reason(e.Reason)
	}
	return fmt.Sprintf("pgdcb: invalid event %d (type %s): %s%s", e.Index, clip.Quote(e.Type), field, clip.Reason(e.Reason))
}

// Is makes errors.Is(err, ErrInvalidEvent) true.
func (e *InvalidEventError) Is(target error) bool { return target == ErrInvalidEvent }

// Size is what an event counts against Config.MaxEventBytes and
// MaxBatchBytes: the bytes of its type, its tags (each `key=value`), its data
// and its metadata.
func (e Event) Size() int {
	return len(e.Type) + e.Tags.Size() + len(e.Data) + len(e.Metadata)
}
