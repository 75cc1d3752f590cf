// Package teststore builds the eventstore.Store every package's tests start
// from: a fresh schema (pgtest.Schema, dropped when the test ends), migrated,
// with group commit on unless pgtest.GroupCommitEnvVar turns it off. It is
// the one copy of the helper each test package used to write for itself; it
// is not in pgtest because eventstore's and sql's in-package tests import
// pgtest, and this package imports both.
package teststore

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// New returns a store on a new pool (pgtest.Pool, closed when the test ends)
// and the pool. cfg may be nil; its Schema is replaced by the fresh schema,
// and GroupCommitDisabled is set when pgtest.GroupCommitDisabled says so.
func New(tb testing.TB, cfg *eventstore.Config) (*eventstore.Store, *pgxpool.Pool) {
	tb.Helper()
	pool := pgtest.Pool(tb)
	return OnPool(tb, pool, cfg), pool
}

// OnPool is New on a pool of the caller's (one with its own size or
// application_name).
func OnPool(tb testing.TB, pool *pgxpool.Pool, cfg *eventstore.Config) *eventstore.Store {
	tb.Helper()
	return onPool(tb, pool, pgtest.Schema(tb), cfg)
}

// Logical is New on the wal_level=logical cluster (pgtest.LogicalCluster),
// for the tests of logical decoding readers; it skips the test when there
// are no local PostgreSQL binaries.
func Logical(tb testing.TB, cfg *eventstore.Config) (*eventstore.Store, *pgxpool.Pool) {
	tb.Helper()
	pool := pgtest.LogicalPool(tb)
	return onPool(tb, pool, pgtest.LogicalSchema(tb), cfg), pool
}

func onPool(tb testing.TB, pool *pgxpool.Pool, schema string, cfg *eventstore.Config) *eventstore.Store {
	tb.Helper()
	if _, err := pgdcbsql.Migrate(context.Background(), pool, schema); err != nil {
		tb.Fatalf("teststore: migrating %s: %v", schema, err)
	}
	c := eventstore.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.Schema = schema
	if pgtest.GroupCommitDisabled() {
		c.GroupCommitDisabled = true
	}
	s, err := eventstore.New(pool, &c)
	if err != nil {
		tb.Fatalf("teststore: %v", err)
	}
	return s
}
