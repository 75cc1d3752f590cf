// Package runstore implements the State Store contract of run engines
// (Temporal-, Conductor-style orchestrators) on the pgdcb event store.
//
// Migrate its tables with runstore.Migrate(ctx, pool, schema) after the
// core's, make a Store with runstore.New(es, nil) over an eventstore.Store,
// and record run events with AppendEvent; FetchEvents reads them back.
//
// A run event is one event of the core log: its type is the eventType, its
// tags are run_id=<runId>, step_id=<stepId> (when set) and
// idempotency_key=<key>, its data is the whole CanonicalEngineEvent as a JSON
// object (runSeq included) and its metadata is the marker {"runstore":"v1"}.
// There is no second event table.
//
// AppendEvent is an AppendIf: an idempotency query on (run_id, idempotency_key)
// makes duplicates, racing or not, return the existing runSeq; a condition on
// the run_id tag makes runSeq = last+1 strictly increasing, each runSeq being
// assigned under the run's exclusive key lock after the previous one committed.
// So a watermark reader (FetchEvents with AfterSeq) never sees a gap that is
// filled later. See docs/RUNSTORE.md.
//
// The snapshot projector (Store.Projector), a projection (package
// projection) over the run events of the log (eventstore's tail read
// narrowed to them), keeps the run_snapshots table current with
// Config.Reducer, also beyond a horizon held by a long transaction; a
// non-contiguous observation or a lag above Config.ResyncLag marks a run
// STALE and rebuilds its snapshot from its events (StaleRuns). GetSnapshot
// reads that table, ProjectSnapshot replays a run on demand.
//
// Package conformance holds the contract's test suite for any StateStore;
// another backend reuses IdempotencyKey, ValidationError and the package's
// sentinel errors.
package runstore
