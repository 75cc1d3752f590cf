package pgdcb

import "github.com/pgdcb/pgdcb/internal/errs"

// Sentinel errors. Typed errors carrying detail (which tag, which event, which
// cursor) match them through errors.Is; use errors.As to read the detail.
var (
	// ErrInvalidTag: a tag is not `key=value` with a valid key and value.
	ErrInvalidTag = errs.ErrInvalidTag
	// ErrInvalidQuery: a query or one of its items is invalid (an empty query where
	// one is required, an empty or too long type).
	ErrInvalidQuery = errs.ErrInvalidQuery
	// ErrInvalidEvent: an event to append is invalid (type, data, metadata, batch size).
	ErrInvalidEvent = errs.ErrInvalidEvent
	// ErrInvalidCursor: a cursor string cannot be decoded.
	ErrInvalidCursor = errs.ErrInvalidCursor
	// ErrInvalidSchema: a schema name is not a plain lower-case identifier.
	ErrInvalidSchema = errs.ErrInvalidSchema
	// ErrConditionFailed: AppendIf found an event matching FailIfEventsMatch that
	// the decision did not see. Nothing was appended; re-read and decide again.
	ErrConditionFailed = errs.ErrConditionFailed
	// ErrIdempotent: the idempotency query matched an event already in the log (or
	// an event id was already stored): the operation was applied before. Nothing
	// was appended.
	ErrIdempotent = errs.ErrIdempotent
	// ErrTransactionState: an append ran in a transaction it cannot be correct in
	// (not READ COMMITTED, or not the transaction's first write).
	ErrTransactionState = errs.ErrTransactionState
	// ErrNotMigrated: the store's schema is missing or older than this library.
	ErrNotMigrated = errs.ErrNotMigrated
	// ErrMigrationDrift: a migration step was applied from another text than
	// this library's (a migration was edited after it ran somewhere), or the
	// schema has steps this library does not have (a newer pgdcb migrated it).
	ErrMigrationDrift = errs.ErrMigrationDrift
	// ErrTransactionIDsAhead: the log holds transaction ids the server has not
	// handed out yet (it was restored into another cluster); appends would sort
	// before older events. See sql.RebaseTransactionIDs.
	ErrTransactionIDsAhead = errs.ErrTransactionIDsAhead
	// ErrOutcomeUnknown: the call failed after its request may have reached the
	// server (the connection was lost, or the context ended, around the commit),
	// so it may have committed or not. The error wraps the cause. Retrying is
	// safe exactly when the write is idempotent: an AppendIf with an
	// idempotency query, events with event ids, or a command with a command id
	// (the retry then gets ErrIdempotent, or the first outcome). Errors that
	// certainly wrote nothing never match it.
	ErrOutcomeUnknown = errs.ErrOutcomeUnknown
	// ErrClosed: the store was closed (eventstore.Store.Close); the call was
	// refused and nothing was sent.
	ErrClosed = errs.ErrClosed
	// ErrNotFound: the thing asked for by name or id does not exist (a
	// projection's checkpoint, an effect, a command). Packages re-export it
	// under their own names (projection.ErrNotFound, effects.ErrNotFound,
	// commands.ErrCommandNotFound); their typed errors name what was missing.
	ErrNotFound = errs.ErrNotFound
	// ErrInvalidArgument: a per-call argument or a Config field is out of range
	// (for example a negative limit). Nothing was sent to the server.
	ErrInvalidArgument = errs.ErrInvalidArgument
)

// InvalidArgumentError names the argument or Config field that is out of
// range (Name, Reason). It matches ErrInvalidArgument.
type InvalidArgumentError = errs.InvalidArgumentError

// OutcomeUnknownError wraps the cause of a failure whose outcome is unknown
// (see ErrOutcomeUnknown). errors.Is matches both ErrOutcomeUnknown and the
// cause; Op names the call.
type OutcomeUnknownError = errs.OutcomeUnknownError
