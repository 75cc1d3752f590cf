package storekit

import (
	"encoding/json"
	"slices"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/seal"
	"github.com/pgdcb/pgdcb/tags"
)

// SubjectTagKey is the key of the tag naming the subject of an erasure
// event (pgdcb.ErasedEventType).
const SubjectTagKey = "pgdcb.subject"

// ErasedEvent is the event Erase appends for subject, or a
// *pgdcb.InvalidArgumentError naming "subject" for a subject that cannot
// tag it.
func ErasedEvent(subject string) (pgdcb.Event, error) {
	if err := seal.CheckSubject(subject); err != nil {
		return pgdcb.Event{}, &pgdcb.InvalidArgumentError{Name: "subject", Reason: err.Error()}
	}
	ts, err := tags.ParseSet(SubjectTagKey + "=" + subject)
	if err != nil {
		return pgdcb.Event{}, &pgdcb.InvalidArgumentError{Name: "subject", Reason: err.Error()}
	}
	data, err := json.Marshal(map[string]string{"subject": subject})
	if err != nil {
		return pgdcb.Event{}, err
	}
	return pgdcb.Event{Type: pgdcb.ErasedEventType, Tags: ts, Data: data}, nil
}

// MarkedSubjects returns the subjects of the personal-field markers
// (pgdcb.Personal) in events' data and metadata, sorted, each once (nil:
// none, a plain append), or an *pgdcb.InvalidEventError naming a malformed
// marker.
func MarkedSubjects(events []pgdcb.Event) ([]string, error) {
	var out []string
	for i, e := range events {
		for _, f := range []struct {
			name string
			b    []byte
		}{{"data", e.Data}, {"metadata", e.Metadata}} {
			subs, err := seal.Subjects(f.b)
			if err != nil {
				return nil, &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: f.name, Reason: err.Error()}
			}
			out = append(out, subs...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
