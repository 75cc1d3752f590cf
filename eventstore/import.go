package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/seal"
)

// ImportTx appends events read from another log (an export, another store)
// in the caller's transaction, keeping each event's recorded time
// (StoredEvent.OccurredAt; the zero time: now) besides its type, tags,
// data, metadata and id. Position and TransactionID are ignored: the log
// assigns its own, in the order of events. It is how a backup is restored
// (`pgdcb import`, docs/LIFECYCLE.md, "Backups and restores"): one
// transaction per source transaction keeps the source's grouping.
//
// Only the schema's owner (the role that ran Migrate) may import: sql.Grant
// does not give an application role the server function, so no application
// can choose a recorded time. The events are validated as Append validates
// them; an event carrying a personal-field marker (pgdcb.Personal) is
// refused with a *pgdcb.InvalidEventError (import seals nothing: values
// already sealed, {"pgdcb.sealed": …}, are stored as given). The log stays
// append-only, and an event id already stored fails
// with pgdcb.ErrIdempotent (the transaction is then aborted: roll it back).
//
// The transaction must be READ COMMITTED and the import must be its first
// write, as for AppendTx; it may call ImportTx again, to import a source
// transaction larger than Config.MaxBatchSize in parts. Each call takes the
// global lock key exclusively (as an escalated append does): appends and
// checks of the store wait for the transaction to end, so keep it short.
// The result's OccurredAt is the last event's recorded time, so that its
// Cursor names that event. Call Notify after the commit to wake tailing
// readers at once.
func (s *Store) ImportTx(ctx context.Context, tx pgx.Tx, events []pgdcb.StoredEvent) (pgdcb.AppendResult, error) {
	evs := make([]pgdcb.Event, len(events))
	at := make([]pgtype.Timestamptz, len(events))
	for i, e := range events {
		evs[i] = e.Event
		at[i] = pgtype.Timestamptz{Time: e.OccurredAt, Valid: !e.OccurredAt.IsZero()}
	}
	if err := s.validate(evs); err != nil {
		return pgdcb.AppendResult{}, err
	}
	if err := refuseMarked(evs); err != nil {
		return pgdcb.AppendResult{}, err
	}
	args := appendEventsArgs(evs, nil, lockSet{}, [16]byte{})[:6]
	args = append(args, at, lockKey(s.cfg.Schema, kindGlobal, ""))
	var (
		txID uint64
		pos  []int64
		last pgtype.Timestamptz
	)
	err := tx.QueryRow(ctx, `SELECT tx, positions, occurred_at FROM `+ident.Schema(s)+`.import_events(
		$1::text[], $2::integer[], $3::text[], $4::jsonb[], $5::jsonb[], $6::uuid[], $7::timestamptz[], $8::bigint)`,
		args...).Scan(&txID, &pos, &last)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgcode.InsufficientPrivilege {
			err = fmt.Errorf("%w (only the schema's owner may import: connect as the role that ran Migrate)", err)
		}
		return pgdcb.AppendResult{}, errf("import", err)
	}
	return pgdcb.AppendResult{TransactionID: txID, Positions: pos, OccurredAt: recordedAt(unixMicros(last))}, nil
}

// refuseMarked refuses the first event whose data or metadata holds a
// personal-field marker: stored in clear, Erase could not forget it.
func refuseMarked(evs []pgdcb.Event) error {
	for i, e := range evs {
		for _, f := range []struct {
			name string
			b    []byte
		}{{"data", e.Data}, {"metadata", e.Metadata}} {
			subs, err := seal.Subjects(f.b)
			if err == nil && len(subs) == 0 {
				continue
			}
			reason := "holds a personal-field marker (pgdcb.Personal): import does not seal; append it, or import it sealed"
			if err != nil {
				reason = err.Error()
			}
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: f.name, Reason: reason}
		}
	}
	return nil
}
