package eventstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/query"
)

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
func (s *Store) Project(ctx context.Context, projectors ...pgdcb.Projector) (appendif.Condition, error) {
	return s.project(ctx, s.ReadPool(), projectors)
}

// ProjectTx is Project in the caller's transaction.
func (s *Store) ProjectTx(ctx context.Context, tx pgx.Tx, projectors ...pgdcb.Projector) (appendif.Condition, error) {
	return s.project(ctx, tx, projectors)
}

func (s *Store) project(ctx context.Context, db dbtx, projectors []pgdcb.Projector) (_ appendif.Condition, err error) {
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
	return storekit.Fold(func(q query.Query) pgdcb.Events { return s.read(ctx, db, q, nil) }, s.cfg.Upcasters, projectors...)
}
