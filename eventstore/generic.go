package eventstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/horizon"
)

// Reads from the start run with JIT compilation and parallel workers off,
// whatever the server's settings. Such a read passes its tags through a
// one-row subquery (whereItems), so its plan is the generic one and costs
// what the planner guesses for any tag: half a percent of the log. As the
// log grows, that guess buys the read what only a large one pays for:
// past about 10^7 events it passes jit_above_cost (100000 by default), and
// the read is compiled at every execution; at 10^8 the planner also
// gathers it with parallel workers, started at every execution. Either
// costs many times the read itself (docs/SCALE.md, "Reading the figures").
// The append functions set jit = off for the first reason
// (sql/functions/_append.sql). Reads after a cursor show the planner their
// values, and a tail read's pages are bounded: neither is estimated at a
// share of the log, and neither pays for this.
//
// set_config(…, true) lasts until the transaction ends: on the pool that is
// the batch's own implicit transaction; in a caller's transaction the read
// puts the caller's values back after it.
const (
	genericOff = `set_config('pgdcb.jit', current_setting('jit'), true),
		set_config('pgdcb.gather', current_setting('max_parallel_workers_per_gather'), true),
		set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)`
	genericBack = `SELECT set_config('jit', current_setting('pgdcb.jit'), true),
		set_config('max_parallel_workers_per_gather', current_setting('pgdcb.gather'), true)`
)

// readQuery runs a read statement on db: a read from the start (generic)
// with JIT and parallel workers off, a tailing read (tail) after clearing
// the backend status snapshot (horizon.Batch), each in one round trip.
func readQuery(ctx context.Context, db dbtx, tail, generic bool, sql string, args ...any) (pgx.Rows, error) {
	switch {
	case tail:
		return horizon.Batch(ctx, db, []string{`SELECT pg_stat_clear_snapshot()`}, nil, sql, args...)
	case generic:
		var after []string
		if _, onPool := db.(*pgxpool.Pool); !onPool {
			after = []string{genericBack}
		}
		return horizon.Batch(ctx, db, []string{`SELECT ` + genericOff}, after, sql, args...)
	}
	return db.Query(ctx, sql, args...)
}
