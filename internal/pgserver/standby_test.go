package pgserver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestStandbyReplaysWithDelayAndPromotes starts a primary and a streaming
// standby with an apply delay: a commit is invisible on the standby until
// replayed, WaitReplay waits for it, and a promoted standby takes writes.
func TestStandbyReplaysWithDelayAndPromotes(t *testing.T) {
	requireBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p, err := StartThrowaway(ctx, Options{})
	require.NoError(t, err)
	defer p.Close()
	sb, err := p.StartStandby(ctx, StandbyOptions{ApplyDelay: 300 * time.Millisecond})
	require.NoError(t, err)
	defer sb.Close()

	rec, err := sb.InRecovery(ctx)
	require.NoError(t, err)
	require.True(t, rec, "the standby is in recovery")
	rec, err = p.InRecovery(ctx)
	require.NoError(t, err)
	require.False(t, rec)

	pc, err := pgx.Connect(ctx, p.DSN())
	require.NoError(t, err)
	defer pc.Close(ctx)
	_, err = pc.Exec(ctx, `CREATE TABLE t (x int)`)
	require.NoError(t, err)
	lsn, err := p.WALPosition(ctx)
	require.NoError(t, err)
	require.NoError(t, sb.WaitReplay(ctx, lsn))

	start := time.Now()
	_, err = pc.Exec(ctx, `INSERT INTO t VALUES (1)`)
	require.NoError(t, err)
	lsn, err = p.WALPosition(ctx)
	require.NoError(t, err)
	sc, err := pgx.Connect(ctx, sb.DSN())
	require.NoError(t, err)
	defer sc.Close(ctx)
	var n int
	require.NoError(t, sc.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n))
	if time.Since(start) < 300*time.Millisecond {
		require.Equal(t, 0, n, "the commit is held back by recovery_min_apply_delay")
	}
	require.NoError(t, sb.WaitReplay(ctx, lsn))
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "replay waited for the delay")
	require.NoError(t, sc.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n))
	require.Equal(t, 1, n)
	_, err = sc.Exec(ctx, `INSERT INTO t VALUES (2)`)
	require.Error(t, err, "a standby is read-only")

	require.NoError(t, sb.SetApplyDelay(ctx, 0))
	require.Equal(t, 0, queryInt(t, sb.DSN(), `SELECT setting::int FROM pg_settings WHERE name = 'recovery_min_apply_delay'`))

	// Crash and restart the standby: it resumes streaming.
	sc.Close(ctx)
	require.NoError(t, sb.Crash(ctx))
	_, err = pc.Exec(ctx, `INSERT INTO t VALUES (3)`)
	require.NoError(t, err)
	require.NoError(t, sb.Start(ctx))
	lsn, err = p.WALPosition(ctx)
	require.NoError(t, err)
	require.NoError(t, sb.WaitReplay(ctx, lsn))
	require.Equal(t, 2, queryInt(t, sb.DSN(), `SELECT count(*)::int FROM t`))

	require.NoError(t, sb.Promote(ctx))
	rec, err = sb.InRecovery(ctx)
	require.NoError(t, err)
	require.False(t, rec, "promoted")
	require.Equal(t, 3, queryInt(t, sb.DSN(), `WITH i AS (INSERT INTO t VALUES (4) RETURNING 1) SELECT (SELECT count(*)::int FROM t) + (SELECT count(*)::int FROM i)`))
}
