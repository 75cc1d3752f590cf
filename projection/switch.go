package projection

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/logical"
)

// Switch makes projection name serve the views its runner registered
// (Config.Views): from then on, readers of each view read name's table. It
// is the last step of a blue/green rebuild: run the new version of a read
// model (a projection of its own name, writing tables of its own, with the
// same Views) beside the live one; it builds from the start of the log while
// readers keep reading the live tables; then call Switch.
//
// Switch waits until name has caught up with the projections serving the
// views now (ctx bounds the wait: give it a deadline), then, in one
// transaction holding their checkpoints (their batches wait), waits until
// name holds at least every event they hold, re-creates each view over
// name's table, records name as the one serving it, and pauses each previous
// projection that serves no view any more (its tables are kept: Switch back
// to it after a Resume, or drop them). A Reset of name that commits before
// Switch holds name's checkpoint row rolls the switch back (it waits again);
// a later one waits for Switch's commit. A reader never sees a view empty,
// doubled, or behind a point it saw before; WaitFor of a runner with Views
// follows the switch. It fails with ErrNotFound when name has no checkpoint,
// with a *pgdcb.InvalidArgumentError when it registered no views, and with an
// error matching ErrNotActive when name is PAUSED or FAILED.
func Switch(ctx context.Context, store *eventstore.Store, name string) error {
	if err := switchViews(ctx, store, name); err != nil {
		return errfmt.Errorf("pgdcb: projection: switch to %q: %w", name, err)
	}
	return nil
}

// switchState is what Switch reads of a checkpoint.
type switchState struct {
	name    string
	state   State
	cur     cursor.Cursor
	logical string
}

func switchViews(ctx context.Context, store *eventstore.Store, name string) error {
	schema := ident.Schema(store)
	var tables, views []string
	// checkpoints primary key.
	err := store.Pool().QueryRow(ctx, `SELECT coalesce(read_model, '{}'), coalesce(views, '{}') FROM `+schema+`.checkpoints WHERE name = $1`, name).Scan(&tables, &views)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("no such checkpoint: %w", ErrNotFound)
	}
	if err != nil {
		return err
	}
	if len(views) == 0 || len(views) != len(tables) {
		return &pgdcb.InvalidArgumentError{Name: "name", Reason: fmt.Sprintf("%q registered no views (Config.Views)", name)}
	}
	for {
		err := switchOnce(ctx, store, schema, name, tables, views)
		if !errors.Is(err, errMovedBack) {
			return err
		}
		// Reset (or a like rewind) of name committed before we held its
		// checkpoint: nothing was switched; wait for it again.
	}
}

// errMovedBack tells switchViews that name's checkpoint went back (a Reset)
// between its catch-up and the views' re-creation: the transaction rolled
// back and Switch waits again.
var errMovedBack = errors.New("the checkpoint went back during the switch")

func switchOnce(ctx context.Context, store *eventstore.Store, schema, name string, tables, views []string) error {
	// Caught up first without holding anything, so that the live
	// projection's batches wait only for the last steps.
	for poll := waitPollMin; ; poll = min(2*poll, waitPollMax) {
		olds, err := servers(ctx, store.Pool(), schema, name, views, false)
		if err != nil {
			return err
		}
		ok, err := caughtUp(ctx, store.Pool(), schema, name, olds)
		if err != nil || ok {
			if err != nil {
				return err
			}
			break
		}
		if err := retry.Sleep(ctx, poll); err != nil {
			return err
		}
	}
	return pgx.BeginTxFunc(ctx, store.Pool(), pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		olds, err := servers(ctx, tx, schema, name, views, true)
		if err != nil {
			return err
		}
		// The previous projections' checkpoints cannot move now: wait
		// until name holds what they hold (READ COMMITTED: each read sees
		// name's newest batch).
		for poll := waitPollMin; ; poll = min(2*poll, waitPollMax) {
			ok, err := caughtUp(ctx, tx, schema, name, olds)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if err := retry.Sleep(ctx, poll); err != nil {
				return err
			}
		}
		for i, v := range views {
			if err := pointView(ctx, tx, v, tables[i]); err != nil {
				return err
			}
		}
		// A Reset of name may have committed since the check above (while
		// we waited for the views' readers): name's checkpoint row FOR
		// SHARE, then check again. A Reset from now on waits for our
		// commit; one that committed is seen here, and we roll back. After
		// the views: Reset locks name's tables, then this row; we hold no
		// lock those wait for (CREATE VIEW takes ACCESS SHARE on the table)
		// and a runner's batch of name cannot wait for the views with the
		// row locked. checkpoints primary key.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM `+schema+`.checkpoints WHERE name = $1 FOR SHARE`, name); err != nil {
			return err
		}
		ok, err := caughtUp(ctx, tx, schema, name, olds)
		if err != nil {
			return err
		}
		if !ok {
			return errMovedBack
		}
		for i, v := range views {
			// read_model_views primary key.
			if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.read_model_views (view_name, projection, table_name) VALUES ($1, $2, $3)
				ON CONFLICT (view_name) DO UPDATE SET projection = EXCLUDED.projection, table_name = EXCLUDED.table_name`, v, name, tables[i]); err != nil {
				return err
			}
		}
		for _, o := range olds {
			// checkpoints primary key; read_model_views has no index on
			// projection: a few rows.
			if _, err := tx.Exec(ctx, `UPDATE `+schema+`.checkpoints SET status = 'PAUSED', updated_at = now()
				WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM `+schema+`.read_model_views WHERE projection = $1)`, o.name); err != nil {
				return err
			}
		}
		return nil
	})
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// servers reads the checkpoints of the projections other than name that
// serve views, in name order; lock: the views' rows and those checkpoints
// FOR UPDATE (views first, then checkpoints: one order for every Switch).
func servers(ctx context.Context, db querier, schema, name string, views []string, lock bool) ([]switchState, error) {
	forUpdate := ""
	if lock {
		forUpdate = " FOR UPDATE"
	}
	// read_model_views primary key.
	rows, err := db.Query(ctx, `SELECT projection FROM `+schema+`.read_model_views
		WHERE view_name = ANY($1) ORDER BY view_name`+forUpdate, views)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == name })
	slices.Sort(names)
	names = slices.Compact(names)
	// checkpoints primary key.
	rows, err = db.Query(ctx, `SELECT name, status, transaction_id, position, coalesce(logical_checkpoint, '')
		FROM `+schema+`.checkpoints WHERE name = ANY($1) ORDER BY name`+forUpdate, names)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (switchState, error) {
		var s switchState
		err := row.Scan(&s.name, &s.state, &s.cur.TransactionID, &s.cur.Position, &s.logical)
		return s, err
	})
}

// caughtUp reports whether name's checkpoint holds every event the
// checkpoints olds hold (at once when there are none): its cursor is at or
// after theirs, and no event after it is one that a logical-mode one
// consumed beyond its cursor (logical.Checkpoint.Consumed; when its
// checkpoint does not say, name's cursor must be at the log's last event).
// It fails with ErrNotActive when name is not ACTIVE.
func caughtUp(ctx context.Context, db querier, schema, name string, olds []switchState) (bool, error) {
	if len(olds) == 0 {
		return true, nil
	}
	var n switchState
	// checkpoints primary key.
	err := db.QueryRow(ctx, `SELECT status, transaction_id, position FROM `+schema+`.checkpoints WHERE name = $1`, name).
		Scan(&n.state, &n.cur.TransactionID, &n.cur.Position)
	if err != nil {
		return false, err
	}
	if n.state != Active {
		return false, fmt.Errorf("%w: %q is %s at %s", ErrNotActive, name, n.state, n.cur)
	}
	at := func(c cursor.Cursor) bool {
		return cursor.Compare(n.cur.TransactionID, n.cur.Position, c.TransactionID, c.Position) >= 0
	}
	for _, o := range olds {
		if !at(o.cur) {
			return false, nil
		}
		if o.logical == "" {
			continue
		}
		cp, err := logical.ParseCheckpoint(o.logical)
		if err != nil {
			return false, fmt.Errorf("checkpoint %q: %w", o.name, err)
		}
		if cp.Done == nil && cp.Sync == nil {
			// It does not say what it consumed beyond its cursor: at most
			// the log's last event.
			var last cursor.Cursor
			// The (transaction_id, position) index, backwards.
			err := db.QueryRow(ctx, `SELECT transaction_id, position FROM `+schema+`.events
				ORDER BY transaction_id DESC, position DESC LIMIT 1`).Scan(&last.TransactionID, &last.Position)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return false, err
			}
			if !at(last) {
				return false, nil
			}
			continue
		}
		// No event after name's cursor may be one it consumed. The
		// (transaction_id, position) index, from name's cursor on: a few
		// rows once name is about caught up (the cursors compared above).
		rows, err := db.Query(ctx, `SELECT transaction_id, position FROM `+schema+`.events
			WHERE (transaction_id, position) > ($1::xid8, $2) ORDER BY transaction_id, position LIMIT $3`,
			n.cur.TransactionID, n.cur.Position, maxScan)
		if err != nil {
			return false, err
		}
		var (
			x       uint64
			p       int64
			seen    int
			missing bool
		)
		_, err = pgx.ForEachRow(rows, []any{&x, &p}, func() error {
			seen++
			missing = missing || cp.Consumed(x, p)
			return nil
		})
		if err != nil {
			return false, err
		}
		if missing || seen == maxScan {
			return false, nil
		}
	}
	return true, nil
}

// maxScan bounds the events caughtUp reads after the new version's cursor;
// more means it is not caught up yet.
const maxScan = 10000
