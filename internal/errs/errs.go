// Package errs defines the sentinel errors once, below every package that
// returns them; package pgdcb exports them to users (the lower packages
// cannot import the root, which imports them).
package errs

import (
	"errors"

	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// Sentinel errors. Typed errors carrying detail (which tag, which event, which
// cursor) match them through errors.Is; use errors.As to read the detail.
var (
	// ErrInvalidTag: a tag is not `key=value` with a valid key and value.
	ErrInvalidTag = errors.New("pgdcb: invalid tag")
	// ErrInvalidQuery: a query or one of its items is invalid (an empty query where
	// one is required, an empty or too long type).
	ErrInvalidQuery = errors.New("pgdcb: invalid query")
	// ErrInvalidEvent: an event to append is invalid (type, data, metadata, batch size).
	ErrInvalidEvent = errors.New("pgdcb: invalid event")
	// ErrInvalidCursor: a cursor string cannot be decoded.
	ErrInvalidCursor = errors.New("pgdcb: invalid cursor")
	// ErrInvalidSchema: a schema name is not a plain lower-case identifier.
	ErrInvalidSchema = errors.New("pgdcb: invalid schema name")
	// ErrConditionFailed: AppendIf found an event matching FailIfEventsMatch that
	// the decision did not see. Nothing was appended; re-read and decide again.
	ErrConditionFailed = errors.New("pgdcb: append condition failed")
	// ErrIdempotent: the idempotency query matched an event already in the log (or
	// an event id was already stored): the operation was applied before. Nothing
	// was appended.
	ErrIdempotent = errors.New("pgdcb: operation already applied")
	// ErrTransactionState: an append ran in a transaction it cannot be correct in
	// (not READ COMMITTED, or not the transaction's first write).
	ErrTransactionState = errors.New("pgdcb: append refused in this transaction")
	// ErrNotMigrated: the store's schema is missing or older than this library.
	ErrNotMigrated = errors.New("pgdcb: schema not migrated")
	// ErrMigrationDrift: a migration step was applied from another text than
	// this library's (a migration was edited after it ran somewhere), or the
	// schema has steps this library does not have (a newer pgdcb migrated it).
	ErrMigrationDrift = errors.New("pgdcb: migration applied from another text")
	// ErrTransactionIDsAhead: the log holds transaction ids the server has not
	// handed out yet (it was restored into another cluster); appends would sort
	// before older events. See sql.RebaseTransactionIDs.
	ErrTransactionIDsAhead = errors.New("pgdcb: stored transaction ids are ahead of the server")
	// ErrOutcomeUnknown: the call failed after its request may have reached the
	// server (the connection was lost, or the context ended, around the commit),
	// so it may have committed or not. The error wraps the cause. Retrying is
	// safe exactly when the write is idempotent: an AppendIf with an
	// idempotency query, events with event ids, or a command with a command id
	// (the retry then gets ErrIdempotent, or the first outcome). Errors that
	// certainly wrote nothing never match it.
	ErrOutcomeUnknown = errors.New("pgdcb: outcome unknown: the write may or may not have committed")
	// ErrClosed: the store was closed (eventstore.Store.Close); the call was
	// refused and nothing was sent.
	ErrClosed = errors.New("pgdcb: store closed")
	// ErrNotFound: the thing asked for by name or id does not exist (a
	// projection's checkpoint, an effect, a command). Packages re-export it
	// under their own names (projection.ErrNotFound, effects.ErrNotFound,
	// commands.ErrCommandNotFound); their typed errors name what was missing.
	ErrNotFound = errors.New("pgdcb: not found")
	// ErrInvalidArgument: a per-call argument or a Config field is out of range
	// (for example a negative limit). Nothing was sent to the server.
	ErrInvalidArgument = errors.New("pgdcb: invalid argument")
)

// InvalidArgumentError names the argument or Config field that is out of
// range. It matches ErrInvalidArgument.
type InvalidArgumentError struct {
	// Name is the argument, such as "ReadOptions.Limit" or "Config.MaxLockKeys".
	Name string
	// Reason says what is wrong, such as "must not be negative (got -5)".
	Reason string
}

func (e *InvalidArgumentError) Error() string {
	return "pgdcb: invalid argument " + e.Name + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// OutcomeUnknownError wraps the cause of a failure whose outcome is unknown
// (see ErrOutcomeUnknown). errors.Is matches both ErrOutcomeUnknown and the
// cause; Op names the call.
type OutcomeUnknownError struct {
	Op  string
	Err error
}

func (e *OutcomeUnknownError) Error() string {
	return "pgdcb: " + e.Op + ": outcome unknown (the write may or may not have committed): " + errfmt.Trim(e.Err.Error())
}

// Unwrap returns the cause.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }
