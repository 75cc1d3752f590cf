package pgdcbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/testing/pgfind"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// SchemaPrefix starts the name of every schema this package makes:
// SchemaPrefix, the test binary's 8-hex-digit token, "_", 8 random hex
// digits.
const SchemaPrefix = "pgdcbtest_"

// Spares is how many migrated schemas the background worker keeps ready
// ahead of the tests that will take them; Makers is how many it migrates at
// once.
const (
	spares = 3
	makers = 2
)

// made is one schema the workers migrated, or why they could not.
type made struct {
	name string
	err  error
}

// schemas makes, hands out and drops the schemas of one test binary.
type schemas struct {
	dsn   string
	token string
	pool  *pgxpool.Pool // shared by the stores that did not ask for their own
	owner *pgx.Conn     // holds the binary's ownership lock; never closed

	need  chan struct{} // one per schema to migrate
	ready chan made
	drops chan string

	mu      sync.Mutex
	started bool
}

var (
	factoryOnce sync.Once
	factory     *schemas
	factoryErr  error
)

// theSchemas returns the binary's factory, starting it on first use: it
// connects, takes the binary's ownership lock, sweeps orphaned schemas and
// starts the workers.
func theSchemas(tb testing.TB) *schemas {
	tb.Helper()
	dsn := pgfind.DSN(tb)
	factoryOnce.Do(func() { factory, factoryErr = startSchemas(dsn) })
	if factoryErr != nil {
		tb.Fatalf("pgdcbtest: %v", factoryErr)
	}
	return factory
}

func startSchemas(dsn string) (*schemas, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	s := &schemas{
		dsn:   dsn,
		token: hex.EncodeToString(b[:]),
		need:  make(chan struct{}, 1<<16),
		ready: make(chan made, 1<<16),
		drops: make(chan string, 1<<16),
	}
	// The ownership lock: held by this connection for as long as the binary
	// runs (it is never closed), released by the server when the binary's
	// connection goes away, however it ends.
	owner, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	if _, err := owner.Exec(ctx, "SELECT pg_advisory_lock($1)", ownerKey(s.token)); err != nil {
		owner.Close(ctx)
		return nil, fmt.Errorf("taking the ownership lock: %w", err)
	}
	s.owner = owner
	if s.pool, err = pgfind.NewPool(ctx, dsn); err != nil {
		return nil, err
	}
	for range makers {
		go s.make()
	}
	go s.drop()
	go s.sweep()
	return s, nil
}

// ownerKey is the advisory lock key that a binary with this token holds
// while it runs.
func ownerKey(token string) int64 {
	h := fnv.New64a()
	h.Write([]byte("pgdcbtest.owner\x00" + token))
	return int64(h.Sum64())
}

// take returns a migrated schema, asking the workers for another to replace
// it (and, the first time, for the spares).
func (s *schemas) take(ctx context.Context) (string, error) {
	s.mu.Lock()
	n := 1
	if !s.started {
		s.started = true
		n += spares
	}
	s.mu.Unlock()
	for range n {
		s.need <- struct{}{}
	}
	select {
	case m := <-s.ready:
		return m.name, m.err
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for a migrated schema: %w", ctx.Err())
	}
}

// make migrates one schema per request.
func (s *schemas) make() {
	for range s.need {
		name, err := s.migrate()
		s.ready <- made{name, err}
	}
}

// migrate creates and migrates a schema with a fresh name, in one
// transaction (one commit, one WAL flush).
func (s *schemas) migrate() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := SchemaPrefix + s.token + "_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := pgdcbsql.MigrateTx(ctx, tx, name)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("migrating schema %s: %w", name, err)
	}
	return name, nil
}

// release drops a schema whose test ended, in the background.
func (s *schemas) release(name string) { s.drops <- name }

func (s *schemas) drop() {
	for name := range s.drops {
		if err := dropSchema(s.pool, name); err != nil {
			// The next binary's sweep drops it (this binary's lock is
			// released when it exits).
			continue
		}
	}
}

// dropSchema drops one of this package's schemas (never another).
func dropSchema(db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, name string) error {
	if !strings.HasPrefix(name, SchemaPrefix) {
		return errors.New("pgdcbtest: refusing to drop " + name + ": not a pgdcbtest schema")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := db.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	return err
}

// sweep drops the schemas of test binaries that are gone: those whose
// ownership lock is free. It runs once, in the background, when the binary
// first makes a store.
func (s *schemas) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname, $1) ORDER BY 1`, SchemaPrefix)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	byToken := map[string][]string{}
	for _, n := range names {
		token, _, ok := strings.Cut(strings.TrimPrefix(n, SchemaPrefix), "_")
		if ok && token != s.token {
			byToken[token] = append(byToken[token], n)
		}
	}
	for token, names := range byToken {
		sweepToken(ctx, conn, token, names)
	}
}

// sweepToken drops a binary's schemas if its ownership lock is free,
// holding the lock meanwhile so that two sweepers do not race.
func sweepToken(ctx context.Context, conn *pgx.Conn, token string, names []string) {
	var free bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", ownerKey(token)).Scan(&free); err != nil || !free {
		return
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", ownerKey(token)) }()
	for _, n := range names {
		_ = dropSchema(conn, n)
	}
}
