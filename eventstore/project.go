package eventstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	appendif "github.com/pgdcb/pgdcb/append"
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
	// Codec encodes State for snapshots; nil: JSONCodec. State must
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

// Project reads, in one pass and one snapshot, the union of the projectors'
// queries, and hands each event to every projector whose own query matches it.
// It returns the condition to append with: fail if any event matching the union
// appears that this read did not see.
//
// A projector that is Snapshottable with a name starts from its newest usable
// stored snapshot and is handed only the events after it: the state and the
// condition are those of a read from the start (docs/SNAPSHOTS.md). After
// folding Config.SnapshotEvery of its events past its snapshot, Project
// stores a new one in the background.
func (s *Store) Project(ctx context.Context, projectors ...Projector) (appendif.Condition, error) {
	return s.project(ctx, s.ReadPool(), projectors)
}

// ProjectTx is Project in the caller's transaction.
func (s *Store) ProjectTx(ctx context.Context, tx pgx.Tx, projectors ...Projector) (appendif.Condition, error) {
	return s.project(ctx, tx, projectors)
}

func (s *Store) project(ctx context.Context, db dbtx, projectors []Projector) (_ appendif.Condition, err error) {
	if t := s.cfg.Tracer; t != nil {
		var union query.Query
		for _, p := range projectors {
			union = union.Or(p.Query())
		}
		var tr *opTrace
		ctx, tr = s.startRead(ctx, ReadOpProject, union, db)
		defer func() { tr.endRead(ReadOpProject, err) }()
	}
	if len(projectors) == 0 {
		return appendif.Condition{}, errors.New("pgdcb: project: no projectors")
	}
	if !s.cfg.SnapshotsDisabled && anySnapshottable(projectors) {
		return s.projectSnapshots(ctx, db, projectors, projectOpts{})
	}
	return Fold(func(q query.Query) *Events { return s.read(ctx, db, q, nil) }, projectors...)
}

// Fold is Project over a read: it reads the union of the projectors' queries
// with read (forward, no limit, no cursor), hands each event to every
// projector whose own query matches it, and returns FailIf(union, &cursor).
// For implementers of Interface (snapshots aside, which only spare work: the
// results are the same; see the package documentation, "Implementing
// Interface").
func Fold(read func(query.Query) *Events, projectors ...Projector) (appendif.Condition, error) {
	if len(projectors) == 0 {
		return appendif.Condition{}, errors.New("pgdcb: project: no projectors")
	}
	if err := validateSnapshotKeys(projectors); err != nil {
		return appendif.Condition{}, err
	}
	var union query.Query
	queries := make([]query.Query, len(projectors))
	for i, p := range projectors {
		queries[i] = p.Query()
		union = union.Or(queries[i])
	}
	es := read(union)
	for ev, err := range es.All() {
		if err != nil {
			return appendif.Condition{}, err
		}
		for i, p := range projectors {
			if queries[i].Matches(ev.Type, ev.Tags) {
				p.Apply(ev)
			}
		}
	}
	c, _ := es.Cursor()
	return appendif.FailIf(union, &c), nil
}
