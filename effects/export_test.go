package effects

// Names the external tests use for the event types, tag keys and error types
// the package keeps to itself.
const (
	TypeRequested     = typeRequested
	TypeStarted       = typeStarted
	TypeCompleted     = typeCompleted
	TypeFailed        = typeFailed
	TypeLeaseExtended = typeLeaseExtended
	TagID             = tagID
)

type NotFoundError = notFoundError

// Add returns the sum of two Stats (for totals over several workers).
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Claims: s.Claims + o.Claims, Executed: s.Executed + o.Executed, Failed: s.Failed + o.Failed,
		Retried: s.Retried + o.Retried, LeaseTakeovers: s.LeaseTakeovers + o.LeaseTakeovers,
		LostLeases: s.LostLeases + o.LostLeases, LeaseExtensions: s.LeaseExtensions + o.LeaseExtensions,
		ClaimConflicts: s.ClaimConflicts + o.ClaimConflicts,
	}
}
