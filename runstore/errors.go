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
	ErrInvalidInput = errors.New("runstore: invalid input")
	// ErrEventIDConflict: an event with the same eventId but another
	// (runId, idempotencyKey) is already stored. Nothing was written.
	ErrEventIDConflict = errors.New("runstore: eventId already used by another event")
	// ErrCorruptEvent: a stored runstore event could not be decoded.
	ErrCorruptEvent = errors.New("runstore: stored event cannot be decoded")
)

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
	return fmt.Sprintf("runstore: invalid %s: %s", e.Field, clip.Reason(e.Reason))
}

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidInput }

// Unwrap returns Err.
func (e *ValidationError) Unwrap() error { return e.Err }

func invalid(field, format string, a ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, a...)}
}
