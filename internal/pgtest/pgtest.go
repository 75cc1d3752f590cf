// Package pgtest gives tests a real PostgreSQL server: a DSN, a pool, a
// schema of their own.
//
// The server is found once per test binary with [pgserver.Find]: the
// PGDCB_TEST_DATABASE_URL environment variable, else a local server, else a
// throwaway cluster made from local PostgreSQL binaries, else a container
// (see package pgserver). When none can be had, tests fail; they never skip,
// so that a CI without a database cannot look green.
//
// Set PGDCB_TEST_LOG=1 to see how the server was found,
// PGDCB_TEST_THROWAWAY=1 to prefer a throwaway cluster (or container) to a
// server already running here, and PGDCB_TEST_GROUP_COMMIT=0 to run the
// suites with the group committer off (see [GroupCommitDisabled]).
//
// A throwaway cluster is removed at exit: by [Main] in packages that use it
// as TestMain, otherwise by a watchdog within a second or two of the test
// binary exiting.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/pgserver"
)

// DefaultMaxConns is the size of pools made by [Pool] unless the DSN sets
// pool_max_conns. `go test ./...` runs packages in parallel against one
// server whose max_connections is usually 100.
const DefaultMaxConns = 16

// LogEnvVar, when set to a non-empty value, makes the server search log its
// decisions to stderr.
const LogEnvVar = "PGDCB_TEST_LOG"

// ThrowawayEnvVar, when set to a non-empty value, sets
// pgserver.Options.PreferThrowaway.
const ThrowawayEnvVar = "PGDCB_TEST_THROWAWAY"

// GroupCommitEnvVar, when set to "0", makes the stores that tests build set
// eventstore.Config.GroupCommitDisabled (see [GroupCommitDisabled]), so that
// every suite can also be run without the group committer (on by default):
//
//	PGDCB_TEST_GROUP_COMMIT=0 go test -race -count=1 ./commands/
const GroupCommitEnvVar = "PGDCB_TEST_GROUP_COMMIT"

// GroupCommitDisabled reports whether GroupCommitEnvVar asks tests for
// stores without group commit. Test helpers that build an eventstore.Store
// set Config.GroupCommitDisabled from it (this package cannot take the
// Config itself: eventstore's dependencies have tests that import it).
func GroupCommitDisabled() bool { return os.Getenv(GroupCommitEnvVar) == "0" }

var (
	once    sync.Once
	server  *pgserver.Server
	findErr error
)

func find() (*pgserver.Server, error) {
	once.Do(func() {
		opts := pgserver.Options{
			EnvVar:          pgserver.TestEnvVar,
			PreferThrowaway: os.Getenv(ThrowawayEnvVar) != "",
		}
		if os.Getenv(LogEnvVar) != "" {
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		server, findErr = pgserver.Find(ctx, opts)
	})
	return server, findErr
}

// DSN returns the connection string of the test server, finding the server
// on first use. It fails the test (never skips it) when there is none.
func DSN(tb testing.TB) string {
	tb.Helper()
	s, err := find()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return s.DSN()
}

// Pool returns a new pool on the test server, closed when the test ends. Its
// MaxConns is DefaultMaxConns unless the DSN sets pool_max_conns.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := NewPool(ctx, DSN(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		tb.Fatalf("pgtest: pinging the test server: %v", err)
	}
	return pool
}

// NewPool returns a new pool on dsn whose MaxConns is DefaultMaxConns
// unless the DSN sets pool_max_conns: [Pool] without a test, for pools that
// outlive one (pgdcbtest's shared pool).
func NewPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing DSN: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating pool: %w", err)
	}
	return pool, nil
}

// SchemaPrefix starts every name [Schema] returns.
const SchemaPrefix = "pgdcb_test_"

// Schema returns a fresh schema name, SchemaPrefix followed by 8 random hex
// digits: a valid unquoted, lower-case identifier. It does not create the
// schema; when the test ends, the schema is dropped (CASCADE) on a
// connection of its own if anybody created it.
func Schema(tb testing.TB) string {
	tb.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	name := SchemaPrefix + hex.EncodeToString(b[:])
	dsn := DSN(tb)
	tb.Cleanup(func() {
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
	for attempt := 1; ; attempt++ {
		_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		if err == nil || attempt == 20 || pgcode.Of(err) != pgcode.DeadlockDetected {
			return err
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
}

// Main is for TestMain in packages with runnable examples, which cannot take
// a testing.TB:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// It finds the server, sets PGDCB_TEST_DATABASE_URL to its DSN for the
// process (examples read it with os.Getenv), runs the tests, stops a
// throwaway server and exits with the tests' code. It exits with code 1 when
// there is no server.
func Main(m *testing.M) {
	s, err := find()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		os.Exit(1)
	}
	if err := os.Setenv(pgserver.TestEnvVar, s.DSN()); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
