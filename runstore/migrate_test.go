package runstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/migrate"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// runstore's steps are pinned like the core's (sql/checksums.txt).
func TestRunstoreMigrationTextsNeverChange(t *testing.T) {
	t.Parallel()
	problems, err := migrate.CheckPinned("migrations/checksums.txt", runstore.Migrations())
	require.NoError(t, err)
	require.Empty(t, problems)
}

// runstoreRelations lists the schema's relations of runstore's line.
func runstoreRelations(t *testing.T, ctx context.Context, es interface{ Schema() string }) []string {
	t.Helper()
	rows, err := pgtest.Pool(t).Query(ctx, `SELECT relname::text FROM pg_class
		WHERE relnamespace = $1::regnamespace AND relname IN ('events_runstore_run_seq', 'events_runstore_log_order', 'run_snapshots', 'run_snapshots_stale', 'runstore_migrations')
		ORDER BY 1`, es.Schema())
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		got = append(got, n)
	}
	require.NoError(t, rows.Err())
	return got
}

// A schema migrated by sql.Migrate alone carries nothing of runstore's (in
// particular no partial index on events); runstore.Migrate adds its tables
// and indexes once, needs the core first, and CheckCurrent / CheckSchema
// tell which is missing.
func TestMigrateAddsRunstoreLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	es, pool := teststore.New(t, nil)
	require.Empty(t, runstoreRelations(t, ctx, es), "the core's migrations create nothing of runstore's")
	require.ErrorIs(t, runstore.CheckCurrent(ctx, pool, es.Schema()), pgdcb.ErrNotMigrated)
	rs, err := runstore.New(es, nil)
	require.NoError(t, err)
	err = rs.CheckSchema(ctx)
	require.ErrorIs(t, err, pgdcb.ErrNotMigrated)
	require.ErrorContains(t, err, "runstore.Migrate")

	done, err := runstore.Migrate(ctx, pool, es.Schema())
	require.NoError(t, err)
	require.Equal(t, []int{1}, done)
	require.Equal(t, []string{"events_runstore_log_order", "events_runstore_run_seq", "run_snapshots", "run_snapshots_stale", "runstore_migrations"},
		runstoreRelations(t, ctx, es))
	require.NoError(t, runstore.CheckCurrent(ctx, pool, es.Schema()))
	require.NoError(t, rs.CheckSchema(ctx))
	st, err := runstore.Status(ctx, pool, es.Schema())
	require.NoError(t, err)
	require.Len(t, st, len(runstore.Migrations()))
	for _, s := range st {
		require.True(t, s.Applied)
		require.Equal(t, s.Checksum(), s.AppliedChecksum)
	}
	again, err := runstore.Migrate(ctx, pool, es.Schema())
	require.NoError(t, err)
	require.Empty(t, again)

	// Before the core: refused, nothing created.
	bare := pgtest.Schema(t)
	_, err = runstore.Migrate(ctx, pool, bare)
	require.ErrorIs(t, err, pgdcb.ErrNotMigrated)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", bare).Scan(&n))
	require.Zero(t, n, "nothing created")

	// In the caller's transaction, after the core's.
	inTx := pgtest.Schema(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = pgdcbsql.MigrateTx(ctx, tx, inTx)
	require.NoError(t, err)
	done, err = runstore.MigrateTx(ctx, tx, inTx)
	require.NoError(t, err)
	require.Equal(t, []int{1}, done)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, runstore.CheckCurrent(ctx, pool, inTx))

	_, err = runstore.Migrate(ctx, pool, "Bad-Name")
	require.ErrorIs(t, err, pgdcb.ErrInvalidSchema)
}

// Script is runstore.Migrate as SQL: run after sql.Script's, it leaves a
// schema runstore.CheckCurrent accepts.
func TestScriptMigratesLikeMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	core, err := pgdcbsql.Script(schema, 0)
	require.NoError(t, err)
	rs, err := runstore.Script(schema, 0)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, core+rs)
	require.NoError(t, err)
	require.NoError(t, runstore.CheckCurrent(ctx, pool, schema))
}
