// Package eventstore is the pgdcb event store: tag-based events in PostgreSQL
// with conditional appends that never lose a decision under concurrency.
//
// A Store is safe for concurrent use. Every call that can block takes a context
// first; each call has a …Tx twin that runs in the caller's pgx.Tx.
package eventstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Config configures a Store. The zero value (or nil) means every default.
type Config struct {
	// Schema holds the store's tables; a plain lower-case identifier.
	// Default "pgdcb". Apply the schema with sql.Migrate first.
	Schema string
	// MaxBatchSize is the most events one append may carry. Default 1000.
	MaxBatchSize int
	// MaxLockKeys is the most advisory lock keys one append takes; an append
	// that needs more takes the global key in exclusive mode instead (it then
	// waits for, and blocks, every other append: keep such batches rare).
	// Bounds the server's shared lock table. Default 128.
	MaxLockKeys int
	// NotifyDisabled turns off the NOTIFY sent after an append commits (for
	// example behind PgBouncer in transaction mode, where LISTEN cannot work;
	// tailing readers then poll). Default false: appends notify (see Notify).
	NotifyDisabled bool
	// Logger receives debug logs. Default: none.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxBatchSize = 1000
	DefaultMaxLockKeys  = 128
)

// Store is a DCB event store in one PostgreSQL schema.
type Store struct {
	pool    *pgxpool.Pool
	cfg     Config
	schema  string // quoted
	channel string
	sql     statements

	notifyPending atomic.Bool
	notifyRunning atomic.Bool
}

// New returns a Store over the pool. It does not touch the database; call
// sql.Migrate (or `pgdcb migrate`) to create the schema, and CheckSchema to
// verify it.
func New(pool *pgxpool.Pool, cfg *Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgdcb: eventstore.New: nil pool")
	}
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if c.Schema == "" {
		c.Schema = pgdcbsql.DefaultSchema
	}
	if c.MaxBatchSize <= 0 {
		c.MaxBatchSize = DefaultMaxBatchSize
	}
	if c.MaxLockKeys <= 0 {
		c.MaxLockKeys = DefaultMaxLockKeys
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	q, err := pgdcbsql.Quote(c.Schema)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: c, schema: q, channel: NotifyChannel(c.Schema)}
	s.sql = newStatements(q)
	return s, nil
}

// NotifyChannel is the LISTEN channel appends to the schema notify on.
func NotifyChannel(schema string) string { return "pgdcb_events_" + schema }

// Pool returns the pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the (unquoted) schema name.
func (s *Store) Schema() string { return s.cfg.Schema }

// QuotedSchema returns the schema as a quoted identifier, for packages that
// build on the store and write their own statements.
func (s *Store) QuotedSchema() string { return s.schema }

// CheckSchema returns an error matching pgdcb.ErrNotMigrated unless the schema
// has every migration this library ships, and one matching
// pgdcb.ErrTransactionIDsAhead when the log was restored into another cluster
// and needs sql.RebaseTransactionIDs before anything is appended. Call it at
// start-up.
func (s *Store) CheckSchema(ctx context.Context) error {
	if err := pgdcbsql.CheckCurrent(ctx, s.pool, s.cfg.Schema); err != nil {
		return err
	}
	return pgdcbsql.CheckTransactionIDs(ctx, s.pool, s.cfg.Schema)
}

// dbtx is what both *pgxpool.Pool and pgx.Tx offer.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func errf(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("pgdcb: %s: %w", op, translate(op, err))
}
