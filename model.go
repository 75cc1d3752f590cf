package pgdcb

import (
	"encoding/json"

	"github.com/pgdcb/pgdcb/query"
)

// Projector folds the events matching its query into a decision state.
type Projector interface {
	// Query selects the events the projector needs.
	Query() query.Query
	// Apply folds one event into the state. It is called only with events that
	// match Query, in log order.
	Apply(StoredEvent)
}

// Model is a Projector over a state of type S.
type Model[S any] struct {
	// Q selects the events folded.
	Q query.Query
	// State is the folded state: the initial value until Project runs.
	State S
	// Fold returns the state after one event.
	Fold func(S, StoredEvent) S
	// Name and Version, when Name is set, opt the model into snapshots (see
	// Snapshottable and WithSnapshots): Project may then start from a stored
	// state. Change Version whenever Fold or the state's encoding changes.
	// Default "": no snapshots.
	Name    string
	Version int
	// Codec encodes State for snapshots; nil: encoding/json. State must
	// survive the round trip.
	Codec Codec[S]
}

// NewModel returns a Model starting at initial.
func NewModel[S any](q query.Query, initial S, fold func(S, StoredEvent) S) *Model[S] {
	return &Model[S]{Q: q, State: initial, Fold: fold}
}

// Query implements Projector.
func (m *Model[S]) Query() query.Query { return m.Q }

// Apply implements Projector.
func (m *Model[S]) Apply(ev StoredEvent) { m.State = m.Fold(m.State, ev) }

// Snapshottable is a Projector whose folded state the store may keep, so that
// Project folds only the events after the newest usable snapshot instead of
// the whole history (docs/SNAPSHOTS.md).
type Snapshottable interface {
	Projector
	// SnapshotKey names the model and the version of its fold: change the
	// version whenever Apply or the state's encoding changes. An empty name
	// opts out (the projector is then read from the start, as any other).
	SnapshotKey() (name string, version int)
	// MarshalState encodes the current state.
	MarshalState() ([]byte, error)
	// UnmarshalState replaces the state with a decoded one. On error it must
	// leave the state as it was: the snapshot is then ignored.
	UnmarshalState([]byte) error
}

// Codec encodes a Model's state for snapshots.
type Codec[S any] interface {
	Marshal(S) ([]byte, error)
	Unmarshal([]byte) (S, error)
}

// jsonCodec is the default Codec: encoding/json, decoding into a zero S.
type jsonCodec[S any] struct{}

// Marshal implements Codec.
func (jsonCodec[S]) Marshal(s S) ([]byte, error) { return json.Marshal(s) }

// Unmarshal implements Codec.
func (jsonCodec[S]) Unmarshal(b []byte) (S, error) {
	var s S
	err := json.Unmarshal(b, &s)
	return s, err
}

// WithSnapshots opts the model into snapshots under name and version (see
// Snapshottable; Codec nil means encoding/json) and returns it. The name must be
// 1..MaxSnapshotNameBytes bytes of UTF-8 without NUL (ValidateSnapshotName):
// Project refuses another with an *InvalidArgumentError before running
// any statement. The version is any int, stored whole (a timestamp such as
// 202611251200 works).
func (m *Model[S]) WithSnapshots(name string, version int) *Model[S] {
	m.Name, m.Version = name, version
	return m
}

// SnapshotKey implements Snapshottable: Name and Version ("" opts out).
func (m *Model[S]) SnapshotKey() (string, int) { return m.Name, m.Version }

func (m *Model[S]) codec() Codec[S] {
	if m.Codec != nil {
		return m.Codec
	}
	return jsonCodec[S]{}
}

// MarshalState implements Snapshottable.
func (m *Model[S]) MarshalState() ([]byte, error) { return m.codec().Marshal(m.State) }

// UnmarshalState implements Snapshottable; State is replaced only on success.
func (m *Model[S]) UnmarshalState(b []byte) error {
	s, err := m.codec().Unmarshal(b)
	if err != nil {
		return err
	}
	m.State = s
	return nil
}
