package effects

import "sync/atomic"

// Stats counts a worker's work since it was made.
type Stats struct {
	// Claims: effects this worker claimed (attempts it started).
	Claims int64
	// Executed: effects it completed.
	Executed int64
	// Failed: effects it failed for good (attempts exhausted).
	Failed int64
	// Retried: failed attempts it recorded that will be retried.
	Retried int64
	// LeaseTakeovers: claims of an effect whose previous lease had expired
	// without a result.
	LeaseTakeovers int64
	// LostLeases: results not recorded because another worker had taken the
	// effect over meanwhile.
	LostLeases int64
	// LeaseExtensions: leases extended while a handler ran.
	LeaseExtensions int64
	// ClaimConflicts: claims lost to another worker (or to a change of the
	// session) between the read and the append.
	ClaimConflicts int64
}

type stats struct {
	claims, executed, failed, retried, leaseTakeovers, lostLeases, leaseExtensions, claimConflicts atomic.Int64
}

// Stats returns the worker's counters; safe to call while Run runs.
func (w *Worker) Stats() Stats {
	s := &w.stats
	return Stats{
		Claims: s.claims.Load(), Executed: s.executed.Load(), Failed: s.failed.Load(),
		Retried: s.retried.Load(), LeaseTakeovers: s.leaseTakeovers.Load(),
		LostLeases: s.lostLeases.Load(), LeaseExtensions: s.leaseExtensions.Load(), ClaimConflicts: s.claimConflicts.Load(),
	}
}
