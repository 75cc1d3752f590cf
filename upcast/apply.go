package upcast

import (
	"encoding/json"
	"fmt"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/eventversion"
)

// Error is the error of a read that met an event it could not bring to the
// current shape: an upcaster failed or returned what is not JSON, or the
// version recorded is not one the registry knows. The read fails with it;
// no event is skipped.
type Error struct {
	// Position and TransactionID locate the event in the log.
	Position      int64
	TransactionID uint64
	// Type is the event's type as stored.
	Type string
	// Version is the version the failing step started from (the recorded
	// one when the record itself is wrong).
	Version int
	// Err says what went wrong (the upcaster's error, wrapped).
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("pgdcb: upcast: event at position %d (type %q, version %d): %v", e.Position, e.Type, e.Version, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Apply brings ev to the current shape of its type, in place: a renamed
// type takes its current name, and the upcasters from the version recorded
// (MetadataKey; 1 without it) to the current one run in order, the new data
// replacing ev.Data and the metadata recording the current version. An
// event already at its current version is left as it is, so Apply twice
// is Apply once. The position, transaction, tags, id and time never change.
func (r *Registry) Apply(ev *pgdcb.StoredEvent) error {
	if r.empty() {
		return nil
	}
	stored := ev.Type
	name := stored
	if n, ok := r.renamed[name]; ok {
		name = n
	}
	steps := r.steps[name]
	if len(steps) == 0 {
		ev.Type = name
		return nil
	}
	v, err := eventversion.Recorded(ev.Metadata)
	if err != nil {
		return &Error{Position: ev.Position, TransactionID: ev.TransactionID, Type: stored, Version: v, Err: err}
	}
	cur := len(steps) + 1
	if v > cur {
		return &Error{Position: ev.Position, TransactionID: ev.TransactionID, Type: stored, Version: v,
			Err: fmt.Errorf("written with version %d, newer than the registry's current %d (older code reading a newer event)", v, cur)}
	}
	if v == cur {
		ev.Type = name
		return nil
	}
	data := ev.Data
	for ; v < cur; v++ {
		out, err := steps[v-1](data)
		if err != nil {
			return &Error{Position: ev.Position, TransactionID: ev.TransactionID, Type: stored, Version: v, Err: err}
		}
		if !json.Valid(out) {
			return &Error{Position: ev.Position, TransactionID: ev.TransactionID, Type: stored, Version: v,
				Err: fmt.Errorf("the upcaster to version %d returned invalid JSON", v+1)}
		}
		data = out
	}
	meta, err := eventversion.Set(ev.Metadata, cur)
	if err != nil {
		return &Error{Position: ev.Position, TransactionID: ev.TransactionID, Type: stored, Version: v, Err: err}
	}
	ev.Type, ev.Data, ev.Metadata = name, data, meta
	return nil
}
