package runstore

import (
	"errors"
	"fmt"

	"github.com/pgdcb/pgdcb/internal/clip"
)

// Sentinel errors of the package; typed errors match them through errors.Is.
var (
	// ErrInvalidInput: an argument was refused (see ValidationError). Nothing
	// was written.
	ErrInvalidInput = errors.New("pgdcb: runstore: invalid input")
	// ErrEventIDConflict: an event with the same eventId but another
	// (runId, idempotencyKey) is already stored. Nothing was written.
	ErrEventIDConflict = errors.New("pgdcb: runstore: eventId already used by another event")
	// ErrCorruptEvent: a stored runstore event could not be decoded.
	ErrCorruptEvent = errors.New("pgdcb: runstore: stored event cannot be decoded")
	// ErrOutcomeUnknown: AppendEvent could not tell whether the event was
	// stored (the connection was lost around its commit and retries could
	// not settle it before ctx ended). Appending the same event again settles
	// it: stored once, either way. (This store's error also matches
	// pgdcb.ErrOutcomeUnknown.)
	ErrOutcomeUnknown = errors.New("pgdcb: runstore: append outcome unknown")
	// ErrContention: AppendEvent lost the race for the run's next runSeq to
	// other writers of the run Config.MaxAppendAttempts times. Nothing was
	// written. (This store's error also matches pgdcb.ErrConditionFailed.)
	ErrContention = errors.New("pgdcb: runstore: append lost the race for the next runSeq too often")
)

// sentinelError makes err match a sentinel of the package too, keeping its
// message and its chain: the one place where the event store's errors become
// runstore's.
type sentinelError struct{ sentinel, err error }

func (e *sentinelError) Error() string        { return e.err.Error() }
func (e *sentinelError) Is(target error) bool { return target == e.sentinel }
func (e *sentinelError) Unwrap() error        { return e.err }

// ValidationError names the field that was refused and why. It matches
// ErrInvalidInput with errors.Is. Every input error of the package's calls is
// one; Error() cuts what it repeats of the input to a few hundred bytes.
type ValidationError struct {
	// Field is the contract's field name: "runId", "eventType", "limit", …;
	// "Config.<Name>" for a field of Config, "eventstore" or "w" for New's
	// and ExportRun's arguments.
	Field string
	// Reason says what is wrong with it.
	Reason string
	// Err is the underlying error, if any: for a Config field, a
	// *pgdcb.InvalidArgumentError (so the error matches
	// pgdcb.ErrInvalidArgument too).
	Err error
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("pgdcb: runstore: invalid %s: %s", e.Field, clip.Reason(e.Reason))
}

// Unwrap returns ErrInvalidInput and Err (when set), so that errors.Is and
// errors.As see both.
func (e *ValidationError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidInput}
	}
	return []error{ErrInvalidInput, e.Err}
}

func invalid(field, format string, a ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, a...)}
}
