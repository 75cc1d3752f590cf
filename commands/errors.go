package commands

import (
	"errors"
	"fmt"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

var (
	// ErrInvalidCommand: the command is malformed (type, data, metadata, no
	// handler). Nothing was run.
	ErrInvalidCommand = errors.New("pgdcb: commands: invalid command")
	// ErrNoHandler: no handler is registered for the command's type.
	ErrNoHandler = errors.New("pgdcb: commands: no handler for command type")
	// ErrCommandNotFound: no commands row matches (tracing helpers). It is
	// pgdcb.ErrNotFound.
	ErrCommandNotFound = pgdcb.ErrNotFound
)

// invalidCommandError says what is wrong with a command.
type invalidCommandError struct {
	Type   string
	Reason string
}

func (e *invalidCommandError) Error() string {
	return fmt.Sprintf("pgdcb: commands: invalid command %s: %s", clip.Quote(e.Type), clip.Reason(e.Reason))
}

// Is makes errors.Is(err, ErrInvalidCommand) true.
func (e *invalidCommandError) Is(target error) bool { return target == ErrInvalidCommand }

// AttemptsExhaustedError is returned when every attempt of a command failed its
// append condition. It matches pgdcb.ErrConditionFailed and unwraps to the last
// *appendif.ConditionFailedError.
type AttemptsExhaustedError struct {
	Type     string
	Attempts int
	Err      error // the last conflict
}

func (e *AttemptsExhaustedError) Error() string {
	return fmt.Sprintf("pgdcb: commands: %s: all %d attempts failed: %s", e.Type, e.Attempts, errfmt.Trim(e.Err.Error()))
}

// Unwrap returns the last conflict.
func (e *AttemptsExhaustedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, pgdcb.ErrConditionFailed) true even if Err is nil.
func (e *AttemptsExhaustedError) Is(target error) bool { return target == pgdcb.ErrConditionFailed }

// RejectedError wraps the error a handler returned (a business rejection). It
// unwraps to the handler's error, so errors.Is/As on the handler's own
// sentinels and types work.
type RejectedError struct {
	Type    string
	Attempt int
	Err     error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("pgdcb: commands: %s rejected: %s", e.Type, errfmt.Trim(e.Err.Error()))
}

// Unwrap returns the handler's error.
func (e *RejectedError) Unwrap() error { return e.Err }

// unsupportedStoreError is returned by the tracing helpers (Command,
// CommandOfEvent, EventsOfCommand) of an executor whose store is not the
// PostgreSQL store: they read the commands table, which only PostgreSQL
// keeps. It matches errors.ErrUnsupported.
type unsupportedStoreError struct {
	Op    string // the method called
	Store string // the store's type
}

func (e *unsupportedStoreError) Error() string {
	return fmt.Sprintf("pgdcb: commands: %s needs the PostgreSQL store's commands table (store is %s)", e.Op, e.Store)
}

// Is makes errors.Is(err, errors.ErrUnsupported) true.
func (e *unsupportedStoreError) Is(target error) bool { return target == errors.ErrUnsupported }
