package horizon

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// Backend is the backend running the oldest transaction of the pool's
// database that has an xid: the one holding every tailing reader's horizon
// back (pgdcb.TailBatch.Horizon).
type Backend struct {
	PID             int
	Database        string
	User            string
	ApplicationName string
	State           string
	// XactStart is when its transaction began.
	XactStart time.Time
	// Query is its current or last statement (truncated to 200 bytes).
	Query string
}

// Oldest returns the backend holding the horizon (ok false when no
// transaction with an xid runs in the pool's database). It reads
// pg_stat_activity; transactions of other databases of the cluster do not
// hold the horizon and are not reported (see eventstore.ReadTail), and a
// prepared transaction (pg_prepared_xacts) also holds it but has no backend,
// so it is not reported here. pgdcb.TailBatch.HorizonHolder names the
// holder of one read's horizon exactly. The role needs pg_read_all_stats (or
// to be superuser) to see other users' queries.
func Oldest(ctx context.Context, pool *pgxpool.Pool) (h Backend, ok bool, err error) {
	// pg_stat_activity is a view over shared memory: no index, one row per
	// backend.
	row := pool.QueryRow(ctx, `SELECT pid, coalesce(datname, ''), coalesce(usename, ''), application_name,
			coalesce(state, ''), xact_start, left(coalesce(query, ''), 200)
		FROM pg_stat_activity
		WHERE backend_xid IS NOT NULL AND xact_start IS NOT NULL
		  AND (datid IS NULL OR datid = (SELECT oid FROM pg_database WHERE datname = current_database()))
		ORDER BY age(backend_xid) DESC LIMIT 1`)
	err = row.Scan(&h.PID, &h.Database, &h.User, &h.ApplicationName, &h.State, &h.XactStart, &h.Query)
	if errors.Is(err, pgx.ErrNoRows) {
		return Backend{}, false, nil
	}
	if err != nil {
		return Backend{}, false, errfmt.Errorf("pgdcb: oldest transaction: %w", err)
	}
	return h, true, nil
}
