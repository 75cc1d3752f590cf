// Package pgcode names the SQLSTATE codes pgdcb reads from server errors:
// PostgreSQL's own (Appendix A of its manual) and the PDxxx codes pgdcb's
// migrations raise. Compare a *pgconn.PgError's Code with them, or use Of.
package pgcode

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgdcb's own codes, raised by the functions and triggers of sql/functions.
const (
	// NotReadCommitted: append_events (or append_group) ran in a transaction
	// that is not READ COMMITTED.
	NotReadCommitted = "PD001"
	// NotFirstWrite: the append was not its transaction's first write.
	NotFirstWrite = "PD002"
	// AppendOnly: an UPDATE, DELETE or TRUNCATE of the events table outside
	// the owner's retention and rebase functions.
	AppendOnly = "PD003"
	// LockKeysUnordered: the lock keys passed to append_events were not
	// strictly ascending.
	LockKeysUnordered = "PD004"
	// RebaseRefused: rebase_transaction_ids could not map the ids below
	// the transaction's own.
	RebaseRefused = "PD005"
)

// PostgreSQL's codes.
const (
	NumericValueOutOfRange    = "22003"
	CharacterNotInRepertoire  = "22021"
	InvalidTextRepresentation = "22P02"
	UntranslatableCharacter   = "22P05"
	UniqueViolation           = "23505"
	CheckViolation            = "23514"
	InvalidSchemaName         = "3F000"
	InsufficientPrivilege     = "42501"
	UndefinedFunction         = "42883"
	UndefinedTable            = "42P01"
	DiskFull                  = "53100"
	ProgramLimitExceeded      = "54000"
	StatementTooComplex       = "54001"
	LockNotAvailable          = "55P03"
	DeadlockDetected          = "40P01"
	QueryCanceled             = "57014"
	AdminShutdown             = "57P01"
	DuplicateObject           = "42710"
	// ObjectNotInPrerequisiteState: among others, a replication slot that
	// can no longer stream (its WAL was removed) or is in use.
	ObjectNotInPrerequisiteState = "55000"
	UndefinedObject              = "42704"
)

// Of returns the SQLSTATE of the server error in err's chain; "" when err
// carries none.
func Of(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
