// Package pgdcb is a Dynamic Consistency Boundary event store on PostgreSQL:
// services append events tagged key=value, decide on state read through tag
// queries, and commit with AppendIf, which fails if anything the decision
// read has changed meanwhile.
//
// This package is the vocabulary every store shares, without pgx: Event
// (MustEvent builds one), StoredEvent, Model (NewModel folds the events a
// query selects into a decision state), the Store interface and the
// sentinel errors. Migrate a schema with sql.Migrate, open the PostgreSQL
// store with eventstore.New (or memstore.New in tests), select events with
// query.Tagged, and decide:
//
//	seats := pgdcb.NewModel(query.Tagged(nil, "course=c1"), 0,
//		func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
//	cond, err := store.Project(ctx, seats) // the state, and the condition it holds under
//	if err != nil || seats.State >= 30 {
//		return err
//	}
//	_, err = store.AppendIf(ctx, []pgdcb.Event{
//		pgdcb.MustEvent("StudentSubscribed", nil, "course=c1", "student=s7"),
//	}, cond) // errors.Is(err, pgdcb.ErrConditionFailed): decide again
//
// docs/GETTING-STARTED.md walks through it.
package pgdcb
