package commands

import "sync/atomic"

// Stats are totals since the executor was made, for demos and benchmarks
// (a Tracer, such as pgdcbprom.New, sees each command).
type Stats struct {
	Executed   uint64 // committed with a new outcome
	Rejected   uint64 // a handler's own error
	Exhausted  uint64 // gave up after MaxAttempts conflicts
	Errors     uint64 // other failures (database, context, invalid command)
	Conflicts  uint64 // appends that failed their condition (each attempt)
	Retries    uint64 // decisions made again after a conflict
	Idempotent uint64 // duplicates answered with the first outcome
}

type stats struct {
	executed, rejected, exhausted, errors, conflicts, retries, idempotent atomic.Uint64
}

// Stats returns the executor's totals.
func (e *Executor) Stats() Stats {
	s := &e.stats
	return Stats{
		Executed: s.executed.Load(), Rejected: s.rejected.Load(), Exhausted: s.exhausted.Load(),
		Errors: s.errors.Load(), Conflicts: s.conflicts.Load(), Retries: s.retries.Load(),
		Idempotent: s.idempotent.Load(),
	}
}
