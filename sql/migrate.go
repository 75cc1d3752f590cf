// Package sql holds pgdcb's schema and the migrator that applies it: numbered,
// embedded migrations (sql/migrations: tables, indexes and data changes), and
// the server functions, one source file each (sql/functions), applied after
// the steps whenever their text changes. sql/schema.sql is the result, as a
// migrated schema has it (docs/SCHEMA.md).
//
// Call sql.Migrate(ctx, pool, "app") once before opening a store on schema
// "app" (or run `pgdcb migrate`); it applies only what is missing.
//
// Every object lives in one schema (default "pgdcb") whose name is quoted into
// each statement; nothing relies on search_path. Concurrent migrators are safe:
// they serialise on a session advisory lock keyed by the schema name, and each
// step runs in a transaction together with its version row.
package sql

import (
	"context"
	"embed"
	"fmt"
	"regexp"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// DefaultSchema is the schema used when none is configured.
const DefaultSchema = "pgdcb"

// Migration is one numbered step: Version, Name, and SQL with the {{schema}}
// placeholder. Its Checksum is the SHA-256 of the SQL text (before the schema
// is filled in), hex-encoded: Migrate records it with the step; a step whose
// text changed after it was applied shows as drift (see CheckCurrent).
type Migration = migrate.Migration

// MigrationStatus says whether a step is applied, when, and with which text
// (AppliedChecksum, empty for steps applied before checksums were recorded;
// Drift when it differs from the library's Checksum).
type MigrationStatus = migrate.Status

// InvalidSchemaError names a schema name that was refused.
type InvalidSchemaError struct{ Name string }

func (e *InvalidSchemaError) Error() string {
	return fmt.Sprintf("pgdcb: invalid schema name %q: use 1-63 characters of [a-z0-9_], starting with a letter or '_'", e.Name)
}

// Is makes errors.Is(err, pgdcb.ErrInvalidSchema) true.
func (e *InvalidSchemaError) Is(target error) bool { return target == pgdcb.ErrInvalidSchema }

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateSchema refuses names that would need quoting (quotes, spaces, upper
// case), so a schema name never changes the meaning of a statement.
func ValidateSchema(name string) error {
	if !schemaRE.MatchString(name) {
		return &InvalidSchemaError{Name: name}
	}
	return nil
}

// Quote returns the schema name as a quoted identifier, after validating it.
func Quote(schema string) (string, error) {
	if err := ValidateSchema(schema); err != nil {
		return "", err
	}
	return pgx.Identifier{schema}.Sanitize(), nil
}

// Migrations returns the embedded steps in version order: tables, indexes
// and data changes only (the functions are the files of sql/functions).
func Migrations() []Migration { return coreLine().Steps }

// LatestVersion is the highest embedded migration version.
func LatestVersion() int { return coreLine().Latest() }

// coreLine is the core schema's line: the numbered steps recorded in
// schema_migrations, then the server functions.
var coreLine = sync.OnceValue(func() *migrate.Line {
	return &migrate.Line{
		Op:        "pgdcb: migrate",
		Title:     "pgdcb migrations",
		Table:     "schema_migrations",
		Hint:      "sql.Migrate or `pgdcb migrate`",
		Steps:     migrate.Steps(migrationFiles, "migrations"),
		Functions: functions(),
	}
})

// Migrate applies every step not yet applied to the schema, creating the
// schema if needed, each in its own transaction with its version row, then,
// in one more transaction, every server function whose text differs from the
// one recorded in the schema (all of them on a new schema). It returns the
// versions of the steps it applied.
//
// Concurrent migrators are safe: they serialise on a session advisory lock
// keyed by the schema name (runstore.Migrate and Grant take it too).
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
	q, err := Quote(schema)
	if err != nil {
		return nil, err
	}
	return coreLine().Migrate(ctx, pool, schema, q)
}

// MigrateTx is Migrate in the caller's transaction: every pending step, the
// changed functions and their records are written in tx, so they commit or
// roll back with the caller's own changes. It serialises with other
// migrators of the schema through a transaction-level advisory lock (held
// until tx ends).
func MigrateTx(ctx context.Context, tx pgx.Tx, schema string) ([]int, error) {
	q, err := Quote(schema)
	if err != nil {
		return nil, err
	}
	return coreLine().MigrateTx(ctx, tx, schema, q)
}

// Script returns the SQL that migrates a schema from step after (0: from
// nothing) to the latest, for teams that run migrations with their own tool:
// the schema and its schema_migrations and schema_functions tables, then each
// step in its own transaction with its version row, then every function with
// its checksum in one transaction, exactly as Migrate applies them. The
// functions are always included (CREATE OR REPLACE): a script run again
// leaves them as they are.
func Script(schema string, after int) (string, error) {
	q, err := Quote(schema)
	if err != nil {
		return "", err
	}
	return coreLine().Script(q, after), nil
}

// Status reports every embedded step and whether it is applied in the schema.
// A schema that does not exist yet reports every step as not applied.
func Status(ctx context.Context, pool *pgxpool.Pool, schema string) ([]MigrationStatus, error) {
	q, err := Quote(schema)
	if err != nil {
		return nil, err
	}
	return coreLine().Status(ctx, pool, q)
}

// CheckCurrent returns an error matching pgdcb.ErrNotMigrated unless every
// embedded step is applied to the schema and every server function is at this
// library's text (a library whose functions changed needs Migrate once), and
// one matching pgdcb.ErrMigrationDrift when a step was applied from another
// text than this library's (an edited migration: the schema may lack what the
// edit added).
func CheckCurrent(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	q, err := Quote(schema)
	if err != nil {
		return err
	}
	return coreLine().CheckCurrent(ctx, pool, schema, q)
}

// CheckCurrentTx is CheckCurrent in tx (runstore's migrator checks the core
// under its lock with it).
func CheckCurrentTx(ctx context.Context, tx pgx.Tx, schema string) error {
	q, err := Quote(schema)
	if err != nil {
		return err
	}
	return coreLine().CheckCurrent(ctx, tx, schema, q)
}
