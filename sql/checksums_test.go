package sql_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/migrate"
	"github.com/pgdcb/pgdcb/internal/pgtest"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Every numbered migration's text is pinned in checksums.txt: editing one
// that has run somewhere leaves those databases without the edit (it
// happened to a pre-release migration, since squashed). A change is a new
// migration, or, for a server function, an edit of its file in sql/functions.
func TestMigrationTextsNeverChange(t *testing.T) {
	t.Parallel()
	problems, err := migrate.CheckPinned("checksums.txt", pgdcbsql.Migrations())
	require.NoError(t, err)
	require.Empty(t, problems)
}

// A schema whose recorded text of a step differs from the library's is
// reported as drift; a schema migrated before checksums were recorded is not.
func TestCheckCurrentReportsDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	_, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	require.NoError(t, pgdcbsql.CheckCurrent(ctx, pool, schema))
	st, err := pgdcbsql.Status(ctx, pool, schema)
	require.NoError(t, err)
	for _, s := range st {
		require.Equal(t, s.Checksum(), s.AppliedChecksum, "step %d records its checksum", s.Version)
		require.False(t, s.Drift)
	}
	q, err := pgdcbsql.Quote(schema)
	require.NoError(t, err)

	// An older schema: no checksum recorded is no drift.
	_, err = pool.Exec(ctx, "UPDATE "+q+".schema_migrations SET checksum = NULL WHERE version = 1")
	require.NoError(t, err)
	require.NoError(t, pgdcbsql.CheckCurrent(ctx, pool, schema))

	// Another text: drift, naming the step.
	_, err = pool.Exec(ctx, "UPDATE "+q+".schema_migrations SET checksum = 'edited' WHERE version = 2")
	require.NoError(t, err)
	err = pgdcbsql.CheckCurrent(ctx, pool, schema)
	require.ErrorIs(t, err, pgdcb.ErrMigrationDrift)
	require.ErrorContains(t, err, "002_decision_snapshots")

	// Migrating again changes nothing and keeps reporting it.
	done, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	require.Empty(t, done)
	require.ErrorIs(t, pgdcbsql.CheckCurrent(ctx, pool, schema), pgdcb.ErrMigrationDrift)
}

// A schema that has applied a step this library does not have (a newer
// pgdcb's, or a pre-release step since squashed) is refused before anything
// is applied, rather than migrated halfway on top of another schema.
func TestMigrateRefusesUnknownSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	_, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	q, err := pgdcbsql.Quote(schema)
	require.NoError(t, err)
	unknown := pgdcbsql.LatestVersion() + 1
	_, err = pool.Exec(ctx, "INSERT INTO "+q+".schema_migrations (version, name) VALUES ($1, 'from_elsewhere')", unknown)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "DELETE FROM "+q+".schema_migrations WHERE version = $1", pgdcbsql.LatestVersion())
	require.NoError(t, err)

	done, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.ErrorIs(t, err, pgdcb.ErrMigrationDrift)
	require.ErrorContains(t, err, fmt.Sprint(unknown))
	require.Empty(t, done, "nothing applied on top of an unknown step")
}
