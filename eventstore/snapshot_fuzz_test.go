package eventstore_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

// fuzzState is a decision state as models keep them: counters, a map, a
// slice, a nested struct and a pointer.
type fuzzState struct {
	Seats    int                 `json:"seats"`
	Students map[string]bool     `json:"students"`
	Log      []int64             `json:"log"`
	Course   struct{ ID string } `json:"course"`
	Closed   *bool               `json:"closed,omitempty"`
}

// A stored snapshot state, whatever its bytes, either decodes (and then
// encodes to a form that decodes to the same state and encodes to itself,
// so a snapshot written from it is read back as it was) or is refused
// leaving the model's state as it was (Project then ignores the snapshot
// and reads from the start).
func FuzzModelUnmarshalState(f *testing.F) {
	for _, s := range []string{
		`{"seats":3,"students":{"s1":true},"log":[1,2],"course":{"ID":"c1"},"closed":true}`,
		`{}`, `null`, `[]`, `{"seats":"3"}`, `{"seats":1e400}`, `{"students":{"a":1}}`, `{"log":[1.5]}`,
		`{"seats":3} trailing`, `{"course":{"ID":"\ud800"}}`, ``, `{"seats":9223372036854775808}`,
	} {
		f.Add([]byte(s))
	}
	initial := fuzzState{Seats: 7, Students: map[string]bool{"x": true}}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := pgdcb.NewModel(query.Tagged(nil, "course=c1"), initial,
			func(s fuzzState, _ pgdcb.StoredEvent) fuzzState { return s }).WithSnapshots("fuzz", 1)
		before, err := m.MarshalState()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.UnmarshalState(b); err != nil {
			after, err := m.MarshalState()
			if err != nil || !bytes.Equal(after, before) {
				t.Fatalf("refused state %q changed the model: %s", b, after)
			}
			return
		}
		decoded := m.State
		enc, err := m.MarshalState()
		if err != nil {
			t.Fatalf("state decoded from %q does not encode: %v", b, err)
		}
		m2 := pgdcb.NewModel(m.Q, fuzzState{}, m.Fold).WithSnapshots("fuzz", 1)
		if err := m2.UnmarshalState(enc); err != nil {
			t.Fatalf("its own encoding %s refused: %v", enc, err)
		}
		enc2, err := m2.MarshalState()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable: %s then %s (%v)", enc, enc2, err)
		}
		if !reflect.DeepEqual(normal(decoded), normal(m2.State)) {
			t.Fatalf("round trip of %q: %+v became %+v", b, decoded, m2.State)
		}
	})
}

// normal makes empty and nil maps and slices equal (JSON does not tell them
// apart once encoded as null).
func normal(s fuzzState) fuzzState {
	if len(s.Students) == 0 {
		s.Students = nil
	}
	if len(s.Log) == 0 {
		s.Log = nil
	}
	return s
}
