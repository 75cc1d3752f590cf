package sql_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/schemadump"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

//go:generate go test -run ^TestSchemaSQLIsCurrent$ -count=1 . -args -update

var update = flag.Bool("update", false, "rewrite schema.sql from a freshly migrated schema")

const schemaHeader = `-- The pgdcb schema as a migrated database has it, generated from the catalog
-- (internal/testing/schemadump) of a schema migrated by sql.Migrate, then by
-- runstore.Migrate; the schema's name reads as pgdcb. A function's body is
-- not repeated here: it is its file in sql/functions (the SHA-256 is of the
-- body the server holds). Do not edit: change sql/migrations (tables, indexes),
-- sql/functions (server functions) or runstore/migrations, then run
-- ` + "`make schema`" + ` (TestSchemaSQLIsCurrent fails until then). docs/SCHEMA.md.
`

// majorLine names the PostgreSQL major version that rendered the file: the
// catalog's rendering (pg_get_functiondef, pg_get_indexdef, …) may differ on
// another, so the test compares only on the same major version.
const majorLine = "-- Rendered by PostgreSQL %d.\n"

// schemaSQL renders schema.sql from two fresh schemas: the core's, and the
// core's with runstore's line.
func schemaSQL(t *testing.T, pool *pgxpool.Pool, major int) string {
	t.Helper()
	ctx := context.Background()
	core, full := pgtest.Schema(t), pgtest.Schema(t)
	_, err := pgdcbsql.Migrate(ctx, pool, core)
	require.NoError(t, err)
	_, err = pgdcbsql.Migrate(ctx, pool, full)
	require.NoError(t, err)
	_, err = runstore.Migrate(ctx, pool, full)
	require.NoError(t, err)
	coreStmts, err := schemadump.Statements(ctx, pool, core, pgdcbsql.DefaultSchema)
	require.NoError(t, err)
	fullStmts, err := schemadump.Statements(ctx, pool, full, pgdcbsql.DefaultSchema)
	require.NoError(t, err)
	var rs []string
	for _, s := range fullStmts {
		if !slices.Contains(coreStmts, s) {
			rs = append(rs, s)
		}
	}
	for _, s := range coreStmts {
		require.Contains(t, fullStmts, s, "runstore.Migrate changes nothing of the core's")
	}
	var b strings.Builder
	b.WriteString(schemaHeader)
	fmt.Fprintf(&b, majorLine, major)
	b.WriteString("\n-- sql.Migrate\n\nCREATE SCHEMA pgdcb;\n")
	for _, s := range coreStmts {
		b.WriteString("\n" + s + "\n")
	}
	b.WriteString("\n-- runstore.Migrate adds\n")
	for _, s := range rs {
		b.WriteString("\n" + s + "\n")
	}
	return b.String()
}

// sql/schema.sql is what the migrations make: a change to a migration or a
// function that is not regenerated (make schema) fails here.
func TestSchemaSQLIsCurrent(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var num int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&num))
	major := num / 10000
	got := schemaSQL(t, pool, major)
	if *update {
		require.NoError(t, os.WriteFile("schema.sql", []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile("schema.sql")
	require.NoError(t, err, "run `make schema` to write sql/schema.sql")
	if !strings.Contains(string(want), fmt.Sprintf(majorLine, major)) {
		t.Skipf("sql/schema.sql was rendered by another PostgreSQL major version than this server's (%d): compared only on that one", major)
	}
	require.Equal(t, string(want), got, "sql/schema.sql is stale: run `make schema`")
}
