package eventstore

import (
	"context"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/storekit"
)

// Erase forgets subject (crypto-shredding; docs/LIFECYCLE.md, "Erasing a
// person's data"): in one transaction it appends a pgdcb.ErasedEventType
// event tagged pgdcb.subject=<subject> and deletes the subject's data key,
// and with it every decision snapshot (any may have folded the subject's
// fields). From its commit on, every read returns each field sealed for the
// subject (pgdcb.Personal) as JSON null, in every process and on standbys
// (reads look keys up on the primary); the events, their types, tags,
// positions and the conditions over them are untouched. An append sealing
// fields of the subject that races Erase either commits first (and is
// erased) or runs after it under a new key (and stays readable): none is
// lost, none is sealed under the destroyed key.
//
// Erase needs what retention needs: run it as the schema's owner (sql.Grant
// gives the application role no DELETE). Erasing a subject that has no key
// still appends the event. A subject is 1..256 bytes of UTF-8 without NUL;
// another one gets a *pgdcb.InvalidArgumentError. The outcome of a lost
// commit is unknown (pgdcb.ErrOutcomeUnknown): erasing again is safe.
func (s *Store) Erase(ctx context.Context, subject string) (res pgdcb.AppendResult, err error) {
	ev, err := storekit.ErasedEvent(subject)
	if err != nil {
		return pgdcb.AppendResult{}, err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return pgdcb.AppendResult{}, errf("erase", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	// Waits for the sealed appends of the subject in flight (they hold it
	// shared to their commit); those that come later wait for this commit.
	if _, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, subjectLockKey(s.cfg.Schema, subject)); err != nil {
		return pgdcb.AppendResult{}, errf("erase", err)
	}
	// The append first: it must be the transaction's first write.
	if res, err = s.appendEvents(ctx, tx, []pgdcb.Event{ev}, nil, false, uuid.Nil); err != nil {
		return pgdcb.AppendResult{}, errf("erase", err)
	}
	// As retention does: a snapshot write in flight finishes first (and is
	// deleted here); one that starts later sees the new epoch and writes
	// nothing; a loaded one of an older epoch is not used. Every snapshot of
	// an older epoch goes, not only those after the key's making: after
	// sql.RebaseTransactionIDs (or for a key copied from another cluster)
	// transaction ids do not order the key against the snapshots.
	b := &pgx.Batch{}
	b.Queue(`LOCK TABLE ` + s.schema + `.decision_snapshots IN SHARE ROW EXCLUSIVE MODE`)
	b.Queue(`WITH k AS (DELETE FROM `+s.schema+`.subject_keys WHERE subject = $1 RETURNING 1),
	     e AS (UPDATE `+s.schema+`.decision_snapshot_epoch SET epoch = epoch + 1 WHERE EXISTS (SELECT FROM k) RETURNING epoch)
	DELETE FROM `+s.schema+`.decision_snapshots WHERE epoch < (SELECT epoch FROM e)`, subject)
	if err = tx.SendBatch(ctx, b).Close(); err != nil {
		return pgdcb.AppendResult{}, errf("erase", err)
	}
	if err = commitTx(ctx, tx); err != nil {
		return pgdcb.AppendResult{}, errf("erase", err)
	}
	s.keys.forget(subject)
	s.Notify(ctx)
	return res, nil
}
