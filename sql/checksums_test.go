package sql_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/migrate"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
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

// The server functions are pinned at a step (the "functions" line of
// checksums.txt): a change of their text comes with a new step, so that a
// schema migrated with it is newer, by its steps, than every library before
// it, and an older library refuses it (TestOlderLibraryRefusesNewerSchema).
func TestFunctionChangesAddAStep(t *testing.T) {
	t.Parallel()
	problems, err := migrate.CheckPinnedFunctions("checksums.txt", pgdcbsql.LatestVersion(), pgdcbsql.Functions())
	require.NoError(t, err)
	require.Empty(t, problems)
}

// A schema migrated by a newer pgdcb (a step this library does not have,
// and functions of another text) is refused by CheckCurrent, and Migrate
// neither applies anything nor writes its own, older, functions over the
// newer ones.
func TestOlderLibraryRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	_, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	q, err := pgdcbsql.Quote(schema)
	require.NoError(t, err)
	// What a newer pgdcb leaves: its next step, and its text of a function.
	newer := pgdcbsql.LatestVersion() + 1
	_, err = pool.Exec(ctx, "INSERT INTO "+q+".schema_migrations (version, name, checksum) VALUES ($1, 'from_a_newer_pgdcb', 'x')", newer)
	require.NoError(t, err)
	fn := pgdcbsql.Functions()[0].Name
	_, err = pool.Exec(ctx, "UPDATE "+q+".schema_functions SET checksum = 'newer' WHERE name = $1", fn)
	require.NoError(t, err)

	err = pgdcbsql.CheckCurrent(ctx, pool, schema)
	require.ErrorIs(t, err, pgdcb.ErrMigrationDrift)
	require.ErrorContains(t, err, "newer pgdcb")
	require.ErrorContains(t, err, fmt.Sprint(newer))

	done, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.ErrorIs(t, err, pgdcb.ErrMigrationDrift)
	require.Empty(t, done)
	var sum string
	require.NoError(t, pool.QueryRow(ctx, "SELECT checksum FROM "+q+".schema_functions WHERE name = $1", fn).Scan(&sum))
	require.Equal(t, "newer", sum, "Migrate wrote this library's older text over a newer function")
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
