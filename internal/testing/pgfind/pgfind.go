// Package pgfind finds the tests' PostgreSQL server, once per test binary,
// with [pgserver.Find]: the PGDCB_TEST_DATABASE_URL environment variable,
// else a local server, else a throwaway cluster made from local PostgreSQL
// binaries, else a container when Docker support is linked in (package
// pgdcbtest/docker, a module of its own, which a user's test may import).
// It is what pgtest and pgdcbtest share: importing pgdcbtest must not bring
// testcontainers-go into a user's go.mod.
//
// Set PGDCB_TEST_LOG=1 to see how the server was found,
// PGDCB_TEST_THROWAWAY=1 to prefer a throwaway cluster (or container) to a
// server already running here, and PGDCB_TEST_GROUP_COMMIT=0 to run the
// suites with the group committer off (see [GroupCommitDisabled]).
//
// A throwaway cluster is removed at exit: by [Main] in packages that use it
// as TestMain, otherwise by a watchdog within a second or two of the test
// binary exiting.
package pgfind

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
		tb.Fatalf("pgfind: %v", err)
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
		tb.Fatalf("pgfind: %v", err)
	}
	tb.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		tb.Fatalf("pgfind: pinging the test server: %v", err)
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

// Main is for TestMain in packages with runnable examples, which cannot take
// a testing.TB:
//
//	func TestMain(m *testing.M) { pgfind.Main(m) }
//
// It finds the server, sets PGDCB_TEST_DATABASE_URL to its DSN for the
// process (examples read it with os.Getenv), runs the tests, stops a
// throwaway server and exits with the tests' code. It exits with code 1 when
// there is no server.
func Main(m *testing.M) { MainThen(m, nil) }

// MainThen is Main calling then, when not nil, after the tests and before a
// throwaway server is stopped (to stop what the tests started on it); its
// error is printed.
func MainThen(m *testing.M, then func() error) {
	s, err := find()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgfind: %v\n", err)
		os.Exit(1)
	}
	if err := os.Setenv(pgserver.TestEnvVar, s.DSN()); err != nil {
		fmt.Fprintf(os.Stderr, "pgfind: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if then != nil {
		if err := then(); err != nil {
			fmt.Fprintf(os.Stderr, "pgfind: %v\n", err)
		}
	}
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "pgfind: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
