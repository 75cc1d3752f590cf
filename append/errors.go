package appendif

import "github.com/pgdcb/pgdcb/internal/errs"

// The sentinels an append reports why it did not commit with, re-exported
// from package pgdcb (the same values, as tags.ErrInvalidTag and
// query.ErrInvalidQuery are): errors.Is(err, appendif.ErrConditionFailed)
// and errors.Is(err, errs.ErrConditionFailed) say the same.
var (
	// ErrConditionFailed: an event matching FailIfEventsMatch was appended
	// that the decision did not see (see ConditionFailedError).
	ErrConditionFailed = errs.ErrConditionFailed
	// ErrIdempotent: the idempotency query or an event id matched: the
	// operation was applied before (see IdempotentError).
	ErrIdempotent = errs.ErrIdempotent
	// ErrTransactionState: the append ran in a transaction it cannot be
	// correct in (not READ COMMITTED, or not the transaction's first write).
	ErrTransactionState = errs.ErrTransactionState
	// ErrOutcomeUnknown: the append may or may not have committed.
	ErrOutcomeUnknown = errs.ErrOutcomeUnknown
)
