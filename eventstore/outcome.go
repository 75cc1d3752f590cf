package eventstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdcb/pgdcb"
)

// Outcomes of writes that fail.
//
// A statement that is its own transaction (Append and AppendIf on the pool), or
// a COMMIT, has an unknown outcome when it fails after its request may have
// reached the server: the connection was lost or the context ended while the
// server was working, so it may have committed before the client heard back.
// Only a server error of severity ERROR says for certain that the transaction
// did not commit: the server rolled it back and said so. Everything else is
// unknown, including errors pgx calls safe to retry (it reports
// "conn closed" as safe on a commit that was applied) and FATAL errors (a
// terminated backend can be told to die after its commit).
//
// Errors raised before anything was sent (invalid input, no connection to be
// had, a context that had already ended) are certain too; the callers return
// those before they send.

// CommitTx commits tx. A failure whose outcome is unknown (see
// pgdcb.ErrOutcomeUnknown) is returned as a *pgdcb.OutcomeUnknownError; any
// other error means the transaction did not commit. Use it to commit the
// transaction of AppendTx or AppendIfTx.
func commitTx(ctx context.Context, tx pgx.Tx) error {
	return MarkOutcomeUnknown("commit", tx.Commit(ctx))
}

// MarkOutcomeUnknown returns err marked as an unknown outcome when it may
// hide a commit: err is the error of a statement that was its own
// transaction, or of a COMMIT, that was sent to the server. nil stays nil, a
// server error of severity ERROR (the transaction certainly rolled back) is
// returned as is, and any other error is wrapped in a
// *pgdcb.OutcomeUnknownError naming op (matching pgdcb.ErrOutcomeUnknown).
// Do not use it for errors raised before anything was sent. (Tracers
// classify errors with OutcomeOf.)
func MarkOutcomeUnknown(op string, err error) error {
	if err == nil || !unknownOutcome(err) {
		return err
	}
	return &pgdcb.OutcomeUnknownError{Op: op, Err: err}
}

// unknownOutcome: see the comment at the top of the file.
func unknownOutcome(err error) bool {
	if errors.Is(err, pgdcb.ErrOutcomeUnknown) {
		return false // already classified
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Severity != "ERROR" && pgErr.SeverityUnlocalized != "ERROR"
	}
	return true
}

// errOutcome is errf for a statement that was its own transaction.
func errOutcome(op string, err error) error {
	if err == nil {
		return nil
	}
	if unknownOutcome(err) {
		return &pgdcb.OutcomeUnknownError{Op: op, Err: err}
	}
	return errf(op, err)
}
