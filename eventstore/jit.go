package eventstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/horizon"
)

// Decision reads run with JIT compilation off, whatever the server's jit
// setting. A read from the start passes its tags through a one-row subquery
// (whereItems), so its plan is the generic one and costs what the planner
// guesses for any tag: half a percent of the log. Past about 10^7 events
// that guess passes jit_above_cost (100000 by default), and PostgreSQL then
// compiles the read at every execution: 1.7 ms at 10^7 events and tens at
// 10^8, for a read of under a millisecond (docs/SCALE.md, "Reading the
// figures"). The append functions set jit = off for the same reason
// (sql/functions/_append.sql). Reads after a cursor show the planner their
// values, and pages of a tail read are bounded: neither is estimated at a
// share of the log, and neither pays for the setting.
//
// set_config(…, true) lasts until the transaction ends: on the pool that is
// the batch's own implicit transaction; in a caller's transaction the read
// puts the caller's value back after it.
const (
	jitOff  = `set_config('pgdcb.jit', current_setting('jit'), true), set_config('jit', 'off', true)`
	jitBack = `SELECT set_config('jit', current_setting('pgdcb.jit'), true)`
)

// readQuery runs a read statement on db in one round trip: with JIT off
// when noJIT (a read from the start); a tailing read (tail) also clears the
// backend status snapshot first (horizon.Batch).
func readQuery(ctx context.Context, db dbtx, tail, noJIT bool, sql string, args ...any) (pgx.Rows, error) {
	var before, after []string
	switch {
	case tail && noJIT:
		before = []string{`SELECT pg_stat_clear_snapshot(), ` + jitOff}
	case tail:
		before = []string{`SELECT pg_stat_clear_snapshot()`}
	case noJIT:
		before = []string{`SELECT ` + jitOff}
	default:
		return db.Query(ctx, sql, args...)
	}
	if _, onPool := db.(*pgxpool.Pool); noJIT && !onPool {
		after = []string{jitBack}
	}
	return horizon.Batch(ctx, db, before, after, sql, args...)
}
