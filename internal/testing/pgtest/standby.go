package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/pgserver"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Pair is a throwaway primary and a streaming hot standby of it
// (pgserver.StartStandby), shared by the tests of one process: see
// StandbyPair. Tests that use it are named TestStandby… so that
// `go test -run Standby ./...` runs them all.
type Pair struct {
	Primary, Standby *pgserver.Server
}

// sharedPair is StandbyPair's pair: synchronous_commit on (PostgreSQL's
// default; throwaway clusters turn it off): a walsender sends only flushed
// WAL, so with it off the standby trails by up to wal_writer_delay (200ms)
// even without an apply delay.
var sharedPair = shared[*Pair]{what: "standby pair", start: func(ctx context.Context) (*Pair, error) {
	return StartPair(ctx, pgserver.Options{Settings: map[string]string{"synchronous_commit": "on"}}, pgserver.StandbyOptions{})
}}

// StandbyPair returns the process's primary and standby, starting them on
// first use (a few seconds), with no apply delay and synchronous_commit on. The pair is shared: a test
// must not promote, stop or crash it (start a pair of its own for that), and
// tests that change its apply delay (Pair.Standby.SetApplyDelay) must not run in
// parallel. Each test works in a schema of its own on the primary. Main
// stops the pair at exit (the throwaway watchdog does otherwise). It skips
// the test when there are no local PostgreSQL binaries.
func StandbyPair(tb testing.TB) *Pair {
	tb.Helper()
	return sharedPair.get(tb)
}

// StartPair starts a throwaway primary with opts and a standby of it with
// sopts; Close stops both. For tests that promote, stop or crash them.
func StartPair(ctx context.Context, opts pgserver.Options, sopts pgserver.StandbyOptions) (*Pair, error) {
	p, err := pgserver.StartThrowaway(ctx, opts)
	if err != nil {
		return nil, err
	}
	sb, err := p.StartStandby(ctx, sopts)
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	return &Pair{Primary: p, Standby: sb}, nil
}

// Close stops and removes the standby, then the primary.
func (p *Pair) Close() error {
	return errors.Join(p.Standby.Close(), p.Primary.Close())
}

// Pools returns a pool on the primary and one on the standby, closed when the
// test ends.
func (p *Pair) Pools(tb testing.TB) (primary, standby *pgxpool.Pool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []struct {
		dsn  string
		dest **pgxpool.Pool
	}{{p.Primary.DSN(), &primary}, {p.Standby.DSN(), &standby}} {
		pool, err := NewPool(ctx, s.dsn)
		if err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		tb.Cleanup(pool.Close)
		*s.dest = pool
	}
	return primary, standby
}

// Sync waits until the standby has replayed everything the primary had
// written when Sync was called (including the apply delay).
func (p *Pair) Sync(ctx context.Context) error {
	lsn, err := p.Primary.WALPosition(ctx)
	if err != nil {
		return err
	}
	return p.Standby.WaitReplay(ctx, lsn)
}

// Schema is pgtest.Schema on the pair's primary: a fresh name, dropped there
// when the test ends (the drop replicates to the standby), unless the
// primary is no longer running then (a test that crashed or closed it).
func (p *Pair) Schema(tb testing.TB) string {
	tb.Helper()
	return schemaOn(tb, p.Primary.DSN(), func() bool { return !p.Primary.Running() })
}

// Migrated is Pools and Schema with the core's migrations applied on the
// primary, returning once the standby has replayed them.
func (p *Pair) Migrated(tb testing.TB) (primary, standby *pgxpool.Pool, schema string) {
	tb.Helper()
	primary, standby = p.Pools(tb)
	schema = p.Schema(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pgdcbsql.Migrate(ctx, primary, schema); err != nil {
		tb.Fatalf("pgtest: migrating %s: %v", schema, err)
	}
	if err := p.Sync(ctx); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return primary, standby, schema
}
