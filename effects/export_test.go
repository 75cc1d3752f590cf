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
