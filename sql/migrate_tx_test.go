package sql_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// MigrateTx writes the steps in the caller's transaction: a rollback leaves
// nothing, a commit leaves a current schema.
func TestMigrateTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	done, err := pgdcbsql.MigrateTx(ctx, tx, schema)
	require.NoError(t, err)
	require.Len(t, done, len(pgdcbsql.Migrations()))
	require.NoError(t, tx.Rollback(ctx))
	require.ErrorIs(t, pgdcbsql.CheckCurrent(ctx, pool, schema), pgdcb.ErrNotMigrated, "rolled back with the caller")

	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = pgdcbsql.MigrateTx(ctx, tx, schema)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, pgdcbsql.CheckCurrent(ctx, pool, schema))

	done, err = pgdcbsql.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	require.Empty(t, done, "Migrate finds nothing left")
}

// Script is what Migrate does, as SQL text: run by another tool, it leaves
// a current schema with the same checksums; from a step, it holds only the
// later ones.
func TestScriptMigratesLikeMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	script, err := pgdcbsql.Script(schema, 0)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, script) // simple protocol: many statements
	require.NoError(t, err)
	require.NoError(t, pgdcbsql.CheckCurrent(ctx, pool, schema))
	st, err := pgdcbsql.Status(ctx, pool, schema)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, s.Checksum(), s.AppliedChecksum)
	}

	later, err := pgdcbsql.Script(schema, 1)
	require.NoError(t, err)
	require.NotContains(t, later, "step 001_")
	require.Contains(t, later, "step 002_")
	for _, f := range pgdcbsql.Functions() {
		require.Contains(t, later, "-- function "+f.Name+" (checksum "+f.Checksum()+")", "every function, whatever the step")
	}
	_, err = pgdcbsql.Script("Bad-Name", 0)
	require.ErrorIs(t, err, pgdcb.ErrInvalidSchema)
	require.True(t, strings.HasPrefix(later, "-- pgdcb migrations"))
}
