// Package horizon is the one place that computes the tailing readers'
// horizon: the transaction id below which no event can commit any more, as
// seen by one statement's snapshot. eventstore.ReadTail, the decision-snapshot
// writes, runstore's projector and everything built on them read below it.
//
// The horizon is the least transaction id that the reading snapshot lists as
// running and that is not proven to belong to another database, else the
// snapshot's xmax. Proven means: pg_stat_activity shows the id as the
// backend_xid of a backend connected to another database, or
// pg_prepared_xacts shows it prepared in another database. Every running id
// that cannot be attributed that way counts as ours. docs/CONCURRENCY.md
// ("The tailing horizon") gives the argument that no event can commit behind
// a cursor read below it, with the order of reads it relies on.
package horizon

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Join returns the SQL that joins the horizon of snapshot snap (an SQL
// expression of type pg_snapshot, typically a column of a one-row FROM item)
// to a statement, as relation hz with columns
//
//	hz.horizon     xid8  the horizon
//	hz.holder_pid  int   the backend whose transaction is the horizon (0 when
//	                     not known: a prepared transaction, a backend that
//	                     ended, or no transaction)
//	hz.holder_db   text  that backend's database ('' when not known)
//
// head is an xid8 expression, the transaction id of the last event of the
// log visible in snap (NULL when none, taken as 0). When it is below the
// snapshot's xmin, every visible event is below every running transaction:
// the horizon is then that xmin (it delivers the same events as the full computation) and
// nothing else is read. Otherwise the running ids of the snapshot are matched
// against pg_stat_activity in one pass: an id stays unless a backend of
// another database shows it, or pg_prepared_xacts shows it prepared in
// another database.
//
// On a hot standby the horizon is always the snapshot's xmin: there
// pg_current_snapshot() lists no running ids (recovery keeps them where the
// SQL functions do not show them), so xmax would count running transactions
// of the primary as ended.
//
// Cost: nothing beyond the snapshot when the head is below xmin; otherwise
// one pass over the server's backend status array (pg_stat_activity: a
// function over shared memory, no table, no index) hashed against the
// snapshot's running ids, and a probe of the prepared transactions (memory)
// per id left.
func Join(snap, head string) string {
	// An empty log (head NULL) takes the shortcut: xmin is below every
	// running id, so it is a sound horizon whatever they are.
	head = `coalesce(` + head + `, '0'::xid8)`
	return `
		LEFT JOIN LATERAL (SELECT x.id, a.pid, a.datname::text AS db
			FROM pg_snapshot_xip(` + snap + `) AS x(id)
			LEFT JOIN pg_stat_activity a ON a.backend_xid = xid(x.id)
			WHERE NOT (` + head + ` < pg_snapshot_xmin(` + snap + `)) AND NOT pg_is_in_recovery()
			  AND (a.datid IS NULL OR a.datid = (SELECT oid FROM pg_database WHERE datname = current_database()))
			  AND NOT EXISTS (SELECT FROM pg_prepared_xacts p
					WHERE p.transaction = xid(x.id) AND p.database <> current_database())
			ORDER BY x.id LIMIT 1) hx ON true
		CROSS JOIN LATERAL (SELECT
			CASE WHEN ` + head + ` < pg_snapshot_xmin(` + snap + `) OR pg_is_in_recovery() THEN pg_snapshot_xmin(` + snap + `)
				ELSE coalesce(hx.id, pg_snapshot_xmax(` + snap + `)) END AS horizon,
			coalesce(hx.pid, 0) AS holder_pid, coalesce(hx.db, '') AS holder_db) hz`
}

// Columns is the select list of the horizon: hz.horizon, hz.holder_pid,
// hz.holder_db, in that order (scanned into a uint64 and a Holder's fields).
const Columns = `hz.horizon, hz.holder_pid, hz.holder_db`

// Holder is the transaction at the horizon: the one that holds tailing
// readers back while it runs.
type Holder struct {
	// PID of its backend; 0 when none is known (a prepared transaction, a
	// backend that ended after the read's snapshot, or no transaction: the
	// horizon is the snapshot's xmax).
	PID int
	// Database it runs in ("" when unknown).
	Database string
}

// Batch runs the statements of before, then sql, then those of after, on db
// in one round trip (in one transaction: the caller's, else the implicit one
// that ends with the batch), and returns sql's rows. Close the rows (which
// runs the rest of the batch and ends it).
//
// A statement that uses Join must come after pg_stat_clear_snapshot() in
// its batch (before): it drops the backend status that an earlier
// statement of the caller's transaction may have cached, so the status the
// statement reads is read after its snapshot was taken (the order the
// argument relies on).
func Batch(ctx context.Context, db interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, before, after []string, sql string, args ...any) (pgx.Rows, error) {
	var b pgx.Batch
	for _, q := range before {
		b.Queue(q)
	}
	b.Queue(sql, args...)
	for _, q := range after {
		b.Queue(q)
	}
	br := db.SendBatch(ctx, &b)
	for range before {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// batchRows closes the batch with its rows.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}
