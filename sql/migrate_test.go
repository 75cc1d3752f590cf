package sql_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

func TestConcurrentMigratorsApplyEachStepOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)

	st, err := pgdcbsql.Status(ctx, pool, schema)
	require.NoError(t, err)
	for _, s := range st {
		require.False(t, s.Applied)
	}
	require.ErrorIs(t, pgdcbsql.CheckCurrent(ctx, pool, schema), pgdcb.ErrNotMigrated)

	var wg sync.WaitGroup
	applied := make([][]int, 6)
	errs := make([]error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], errs[i] = pgdcbsql.Migrate(ctx, pool, schema)
		}()
	}
	wg.Wait()
	total := 0
	for i := range 6 {
		require.NoError(t, errs[i])
		total += len(applied[i])
	}
	require.Equal(t, len(pgdcbsql.Migrations()), total, "each step applied exactly once across migrators")

	st, err = pgdcbsql.Status(ctx, pool, schema)
	require.NoError(t, err)
	for _, s := range st {
		require.True(t, s.Applied, s.Name)
		require.False(t, s.AppliedAt.IsZero())
	}
	require.NoError(t, pgdcbsql.CheckCurrent(ctx, pool, schema))
	again, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	require.Empty(t, again)

	var nTables int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('events','commands','checkpoints','decision_snapshots','schema_migrations','schema_functions')",
		schema).Scan(&nTables))
	require.Equal(t, 6, nTables)
	var nRunstore int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace AND (relname LIKE '%runstore%' OR relname LIKE 'run\\_%')",
		schema).Scan(&nRunstore))
	require.Zero(t, nRunstore, "runstore's tables and indexes are runstore.Migrate's")

	// The functions: once, all in one transaction, by one of the migrators.
	var nFunctions, nTx int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT xmin::text) FROM "+pgx.Identifier{schema}.Sanitize()+".schema_functions").Scan(&nFunctions, &nTx))
	require.Equal(t, len(pgdcbsql.Functions()), nFunctions)
	require.Equal(t, 1, nTx)
}

func TestMigrationsAreNumberedAndRenderSchema(t *testing.T) {
	t.Parallel()
	ms := pgdcbsql.Migrations()
	require.NotEmpty(t, ms)
	for i, m := range ms {
		if i > 0 {
			require.Greater(t, m.Version, ms[i-1].Version)
		}
		require.NotContains(t, m.Render(`"s"`), "{{schema}}")
	}
	require.Equal(t, ms[len(ms)-1].Version, pgdcbsql.LatestVersion())
}

func TestInvalidSchemaRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, name := range []string{`x"y`, "a b", "public; drop", ""} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			_, err := pgdcbsql.Migrate(context.Background(), pool, name)
			require.ErrorIs(t, err, pgdcb.ErrInvalidSchema, name)
		})
	}
}
