package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/logical"
)

// State is a checkpoint's status.
type State string

// States.
const (
	// Active: the projection processes events.
	Active State = "ACTIVE"
	// Paused: stopped by Pause until Resume.
	Paused State = "PAUSED"
	// Failed: the handler failed MaxAttempts times in a row; stopped until Resume.
	Failed State = "FAILED"
)

// ErrNotFound: no checkpoint of that name exists (the projection never ran).
// It is pgdcb.ErrNotFound.
var ErrNotFound = pgdcb.ErrNotFound

// Status is a checkpoint row: where a projection (or outbox publisher) is and
// how it is doing.
type Status struct {
	Name  string
	State State
	// Cursor: every matching event up to it was handled and committed.
	Cursor cursor.Cursor
	// ErrorCount is the number of consecutive failed attempts (0 after a
	// committed batch or Resume).
	ErrorCount int
	// LastError is the last failure's message ("" if none since the last Reset).
	LastError string
	// Leader identifies the process that last led (Config.Identity).
	Leader string
	// HeartbeatAt is when the leader last reported; zero if never.
	HeartbeatAt time.Time
	UpdatedAt   time.Time
	// Tables are the read model's tables its runner registered
	// (Config.Tables), quoted and schema-qualified: what Reset empties.
	// None: Reset moves only the checkpoint.
	Tables []string
}

// GetStatus reads the checkpoint name of the store. It fails with ErrNotFound
// when there is none.
func GetStatus(ctx context.Context, store *eventstore.Store, name string) (Status, error) {
	// checkpoints primary key.
	row := store.Pool().QueryRow(ctx, `SELECT name, status, transaction_id, position, error_count,
		coalesce(last_error, ''), coalesce(leader, ''), heartbeat_at, updated_at, coalesce(read_model, '{}')
		FROM `+ident.Schema(store)+`.checkpoints WHERE name = $1`, name)
	var (
		st Status
		hb *time.Time
	)
	err := row.Scan(&st.Name, &st.State, &st.Cursor.TransactionID, &st.Cursor.Position, &st.ErrorCount, &st.LastError, &st.Leader, &hb, &st.UpdatedAt, &st.Tables)
	if errors.Is(err, pgx.ErrNoRows) {
		return Status{}, errfmt.Errorf("pgdcb: projection: no such checkpoint %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Status{}, fmt.Errorf("pgdcb: projection: status of %q: %w", name, err)
	}
	if hb != nil {
		st.HeartbeatAt = *hb
	}
	return st, nil
}

// Pause stops the projection name until Resume (within one poll interval; a
// batch in flight rolls back). Pausing a FAILED projection makes it PAUSED.
func Pause(ctx context.Context, store *eventstore.Store, name string) error {
	return setState(ctx, store, name, `status = 'PAUSED'`)
}

// Resume makes a PAUSED or FAILED projection ACTIVE again, with its error
// count reset; it continues from its checkpoint.
func Resume(ctx context.Context, store *eventstore.Store, name string) error {
	return setState(ctx, store, name, `status = 'ACTIVE', error_count = 0`)
}

func setState(ctx context.Context, store *eventstore.Store, name, set string) error {
	if err := ensure(ctx, store.Pool(), ident.Schema(store), name); err != nil {
		return err
	}
	// checkpoints primary key.
	_, err := store.Pool().Exec(ctx, `UPDATE `+ident.Schema(store)+`.checkpoints SET `+set+`, updated_at = now() WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("pgdcb: projection: updating %q: %w", name, err)
	}
	return nil
}

// Reset rebuilds the projection name from zero, in one transaction: it
// empties the read model's tables its runner registered (Config.Tables,
// Status.Tables) and calls clear (if not nil) in that transaction, and moves
// the checkpoint to the start of the log, ACTIVE with no errors. A leader's
// batch in flight then fails its compare-and-set on the checkpoint and rolls
// back. With no tables registered and a nil clear only the checkpoint moves,
// and a read model kept elsewhere is rebuilt on top of itself.
//
// For a partitioned projection (NewPartitioned) Reset calls clear, then
// moves every partition back to the start of the log, in one transaction;
// its workers lose their partitions (a batch in flight rolls back) and
// claim them again within a renewal interval.
func Reset(ctx context.Context, store *eventstore.Store, name string, clear func(ctx context.Context, tx pgx.Tx) error) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if ok, err := partitioned(ctx, store, name); err != nil {
		return err
	} else if ok {
		return resetPartitioned(ctx, store, name, clear)
	}
	pool := store.Pool()
	if err := ensure(ctx, pool, ident.Schema(store), name); err != nil {
		return err
	}
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		// The registered tables are locked before the checkpoint row.
		if _, err := clearReadModel(ctx, tx, store, name); err != nil {
			return errfmt.Errorf("pgdcb: projection: reset %q: clearing the read model: %w", name, err)
		}
		// checkpoints primary key; the row lock orders us with a leader's
		// checkpoint update.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM `+ident.Schema(store)+`.checkpoints WHERE name = $1 FOR UPDATE`, name); err != nil {
			return fmt.Errorf("pgdcb: projection: reset %q: %w", name, err)
		}
		if clear != nil {
			if err := clear(ctx, tx); err != nil {
				return fmt.Errorf("pgdcb: projection: reset %q: clearing the read model: %w", name, err)
			}
		}
		// A logical projection's slot goes too (it would retain WAL until
		// the projection runs again); an active one is replaced by its
		// reader, fenced by this reset.
		if err := dropIdleSlots(ctx, tx, logical.SlotName(store.Schema(), name)); err != nil {
			return fmt.Errorf("pgdcb: projection: reset %q: dropping the replication slot: %w", name, err)
		}
		// checkpoints primary key.
		_, err := tx.Exec(ctx, `UPDATE `+ident.Schema(store)+`.checkpoints SET transaction_id = '0', position = 0,
			logical_checkpoint = NULL, status = 'ACTIVE', error_count = 0, last_error = NULL, updated_at = now() WHERE name = $1`, name)
		if err != nil {
			return fmt.Errorf("pgdcb: projection: reset %q: %w", name, err)
		}
		return nil
	})
}
