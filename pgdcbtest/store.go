package pgdcbtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgfind"
	"github.com/pgdcb/pgdcb/runstore"
)

// Options configures NewStore. nil means every default.
type Options struct {
	// Config is passed to eventstore.New. Its Schema must be empty: the
	// store's schema is the test's own. Default: every default of
	// eventstore.Config.
	Config *eventstore.Config
	// OwnPool gives the store a pool of its own (pgtest's size, closed when
	// the test ends) instead of the pool the test binary's stores share. Use
	// it for a test that holds many connections at once or changes session
	// settings. Default false.
	OwnPool bool
	// Runstore also applies runstore's migrations (runstore.Migrate: its
	// run_snapshots table and its indexes on events), for a test that builds
	// a runstore.Store on the store. Default false: the core schema only.
	Runstore bool
}

// takeTimeout bounds the wait for a migrated schema.
const takeTimeout = 2 * time.Minute

// NewStore returns a store on a fresh, migrated schema of the test server,
// dropped (CASCADE, with anything the test created in it) when the test
// ends. It fails the test when there is no server or the schema cannot be
// had. Safe for parallel tests.
//
// With PGDCB_TEST_GROUP_COMMIT=0 in the environment every store has
// Config.GroupCommitDisabled set (docs/GROUPCOMMIT.md), so that a suite can
// be run without the group committer.
//
// The store shares one pool (pgfind.DefaultMaxConns connections unless the
// DSN sets pool_max_conns) with the binary's other stores unless
// Options.OwnPool is set; store.Pool() returns it, store.Schema() the
// schema's name.
func NewStore(tb testing.TB, opts *Options) *eventstore.Store {
	tb.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	var cfg eventstore.Config
	if o.Config != nil {
		cfg = *o.Config
	}
	if cfg.Schema != "" {
		tb.Fatalf("pgdcbtest: NewStore: Options.Config.Schema must be empty (got %q): the store's schema is the test's own", cfg.Schema)
	}
	s := theSchemas(tb)
	ctx, cancel := context.WithTimeout(context.Background(), takeTimeout)
	defer cancel()
	name, err := s.take(ctx)
	if err != nil {
		tb.Fatalf("pgdcbtest: NewStore: %v", err)
	}
	tb.Cleanup(func() { s.release(name) })
	if o.Runstore {
		if _, err := runstore.Migrate(ctx, s.pool, name); err != nil {
			tb.Fatalf("pgdcbtest: NewStore: %v", err)
		}
	}
	pool := s.pool
	if o.OwnPool {
		pool = pgfind.Pool(tb) // closed by its own cleanup, before the schema is dropped
	}
	cfg.Schema = name
	if pgfind.GroupCommitDisabled() {
		cfg.GroupCommitDisabled = true
	}
	store, err := eventstore.New(pool, &cfg)
	if err != nil {
		tb.Fatalf("pgdcbtest: NewStore: %v", err)
	}
	return store
}

// Pool returns the pool the test binary's stores share (see NewStore). Do
// not close it.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return theSchemas(tb).pool
}
