// Package pgtest gives pgdcb's own tests a real PostgreSQL server: a DSN, a
// pool, a schema of their own.
//
// The server is found once per test binary by package pgfind: the
// PGDCB_TEST_DATABASE_URL environment variable, else a local server, else a
// throwaway cluster made from local PostgreSQL binaries. The container
// fallback is make test's: when none of these answers, it starts one with
// the command pgcontainer of the module pgdcbtest/docker (testcontainers-go
// stays out of the core's go.mod) and sets PGDCB_TEST_DATABASE_URL. When
// none can be had, tests fail; they never skip, so that a CI without a
// database cannot look green.
//
// Set PGDCB_TEST_LOG=1 to see how the server was found,
// PGDCB_TEST_THROWAWAY=1 to prefer a throwaway cluster (or container) to a
// server already running here, and PGDCB_TEST_GROUP_COMMIT=0 to run the
// suites with the group committer off (see [GroupCommitDisabled]).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgfind"
)

// Names of package pgfind, which finds the server.
const (
	DefaultMaxConns   = pgfind.DefaultMaxConns
	LogEnvVar         = pgfind.LogEnvVar
	ThrowawayEnvVar   = pgfind.ThrowawayEnvVar
	GroupCommitEnvVar = pgfind.GroupCommitEnvVar
)

// GroupCommitDisabled is pgfind.GroupCommitDisabled.
func GroupCommitDisabled() bool { return pgfind.GroupCommitDisabled() }

// DSN is pgfind.DSN: the test server's connection string, found on first
// use; the test fails (never skips) when there is none.
func DSN(tb testing.TB) string { tb.Helper(); return pgfind.DSN(tb) }

// Pool is pgfind.Pool: a new pool on the test server, closed when the test
// ends.
func Pool(tb testing.TB) *pgxpool.Pool { tb.Helper(); return pgfind.Pool(tb) }

// NewPool is pgfind.NewPool.
func NewPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	return pgfind.NewPool(ctx, dsn)
}

// Main is pgfind.Main, for TestMain, closing the shared standby pair
// (StandbyPair) and the wal_level=logical cluster (LogicalCluster) after
// the tests:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	pgfind.MainThen(m, func() error { return errors.Join(sharedPair.close(), sharedLogical.close()) })
}

// SchemaPrefix starts every name [Schema] returns.
const SchemaPrefix = "pgdcb_test_"

// Schema returns a fresh schema name, SchemaPrefix followed by 8 random hex
// digits: a valid unquoted, lower-case identifier. It does not create the
// schema; when the test ends, the schema is dropped (CASCADE) on a
// connection of its own if anybody created it.
func Schema(tb testing.TB) string {
	tb.Helper()
	return schemaOn(tb, DSN(tb))
}

// schemaOn is Schema on the server at dsn; the drop is skipped when
// skipDrop says so at the end of the test (a server the test stopped).
func schemaOn(tb testing.TB, dsn string, skipDrop ...func() bool) string {
	tb.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	name := SchemaPrefix + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		for _, skip := range skipDrop {
			if skip() {
				return
			}
		}
		if err := dropSchema(dsn, name); err != nil {
			tb.Errorf("pgtest: dropping schema %s: %v", name, err)
		}
	})
	return name
}

func dropSchema(dsn, name string) error {
	if !strings.HasPrefix(name, SchemaPrefix) {
		return fmt.Errorf("refusing to drop %q: not a test schema", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// A store's background work (a decision snapshot write, bounded by its
	// timeout) may still run on the schema when the test ends; the DROP can
	// then be chosen as a deadlock's victim. It is retried until that work
	// is done.
	await.Within(20*time.Second, func() (bool, string) {
		_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		return err == nil || pgcode.Of(err) != pgcode.DeadlockDetected, ""
	})
	return err
}
