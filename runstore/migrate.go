package runstore

import (
	"context"
	"embed"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/migrate"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// line is runstore's migration line: its tables and its two partial indexes
// on the core's events table, recorded in the schema's runstore_migrations
// table. A schema that does not use runstore carries none of them.
var line = sync.OnceValue(func() *migrate.Line {
	return &migrate.Line{
		Op:    "pgdcb: migrate runstore",
		Title: "pgdcb runstore migrations",
		Table: "runstore_migrations",
		Hint:  "runstore.Migrate or `pgdcb migrate -runstore`",
		Steps: migrate.Steps(migrationFiles, "migrations"),
	}
})

// Migrate applies runstore's pending steps to the schema (its run_snapshots
// table and its indexes on the events table), each in its own transaction
// with its row in the schema's runstore_migrations table, and returns the
// versions it applied. The core schema must be migrated first (sql.Migrate):
// otherwise the error matches pgdcb.ErrNotMigrated and nothing is applied.
// Like sql.Migrate, run it as the schema's owner, at deploy time or at
// start-up (New does not migrate: it takes no context and an application
// role may not create); concurrent migrators of a schema are safe.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
	q, err := pgdcbsql.Quote(schema)
	if err != nil {
		return nil, err
	}
	if err := pgdcbsql.CheckCurrent(ctx, pool, schema); err != nil {
		return nil, errfmt.Wrap("migrate runstore", err)
	}
	return line().Migrate(ctx, pool, schema, q)
}

// MigrateTx is Migrate in the caller's transaction (after sql.MigrateTx, for
// example): the steps and their rows commit or roll back with tx.
func MigrateTx(ctx context.Context, tx pgx.Tx, schema string) ([]int, error) {
	q, err := pgdcbsql.Quote(schema)
	if err != nil {
		return nil, err
	}
	if err := pgdcbsql.CheckCurrentTx(ctx, tx, schema); err != nil {
		return nil, errfmt.Wrap("migrate runstore", err)
	}
	return line().MigrateTx(ctx, tx, schema, q)
}

// Script returns the SQL of runstore's steps after step after (0: all), for
// teams that run migrations with their own tool, after sql.Script's.
func Script(schema string, after int) (string, error) {
	q, err := pgdcbsql.Quote(schema)
	if err != nil {
		return "", err
	}
	return line().Script(q, after), nil
}

// Status reports runstore's steps and whether each is applied in the schema.
func Status(ctx context.Context, pool *pgxpool.Pool, schema string) ([]pgdcbsql.MigrationStatus, error) {
	q, err := pgdcbsql.Quote(schema)
	if err != nil {
		return nil, err
	}
	return line().Status(ctx, pool, q)
}

// CheckSchema returns an error matching pgdcb.ErrNotMigrated unless the
// core schema is current (eventstore.Store.CheckSchema, with its
// transaction-id check) and every runstore step is applied (and one matching
// pgdcb.ErrMigrationDrift for a step applied from another text). Call it at
// start-up.
func (s *Store) CheckSchema(ctx context.Context) error {
	if err := s.es.CheckSchema(ctx); err != nil {
		return err
	}
	q, err := pgdcbsql.Quote(s.es.Schema())
	if err != nil {
		return err
	}
	return line().CheckCurrent(ctx, s.es.Pool(), s.es.Schema(), q)
}
