// Package eventstore is the pgdcb event store: tag-based events in PostgreSQL
// with conditional appends that never lose a decision under concurrency.
//
// Create the schema once with sql.Migrate(ctx, pool, "app") (or `pgdcb
// migrate`), then open a Store with eventstore.New(pool,
// &eventstore.Config{Schema: "app"}). Append records events; a decision
// reads with Project (or Read), which returns the condition under which
// AppendIf commits only if nothing it read has changed. Call Close(ctx)
// before closing the pool. docs/GETTING-STARTED.md walks through it.
//
// A Store is safe for concurrent use. Every call that can block takes a context
// first; each call has a …Tx twin that runs in the caller's pgx.Tx.
//
// *Store satisfies pgdcb.Store, the interface code that only appends, reads,
// projects and tails takes; package memstore implements it in memory, and
// package eventstore/conformance checks an implementation.
package eventstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/storekit"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
	"github.com/pgdcb/pgdcb/upcast"
)

// Config configures a Store. The zero value (or nil) means every default: in
// every numeric field 0 means the default; New refuses negative values with
// a *pgdcb.InvalidArgumentError.
type Config struct {
	// Schema holds the store's tables; a plain lower-case identifier.
	// Default "pgdcb". Apply the schema with sql.Migrate first.
	Schema string
	// MaxBatchSize is the most events one append may carry. 0: the default,
	// 1000.
	MaxBatchSize int
	// MaxLockKeys is the most advisory lock keys one append takes; an append
	// that needs more takes the global key in exclusive mode instead (it then
	// waits for, and blocks, every other append: keep such batches rare).
	// Bounds the server's shared lock table. 0: the default, 128.
	MaxLockKeys int
	// MaxEventBytes is the most bytes one event may take: its type, its tags
	// (each `key=value`), its data and its metadata (see Event.Size). An
	// append with a larger event is refused before anything is sent. 0: the
	// default, 1 MiB; at most MaxBytesLimit.
	MaxEventBytes int
	// MaxBatchBytes is the most bytes one append may carry, summed over its
	// events as for MaxEventBytes; checked before anything is sent. 0: the
	// default, 16 MiB (or MaxEventBytes when that is larger); at most
	// MaxBytesLimit.
	MaxBatchBytes int
	// NotifyDisabled turns off the NOTIFY sent after an append commits (for
	// example behind PgBouncer in transaction mode, where LISTEN cannot work;
	// tailing readers then poll). Default false: appends notify (see Notify).
	NotifyDisabled bool
	// Logger receives the store's logs: failures at Warn (snapshot writes
	// and loads, notifications, groups retried alone), with the error under
	// "err". Default: none.
	Logger *slog.Logger
	// Tracer observes appends and reads (see Tracer; packages pgdcbprom and
	// pgdcbotel adapt it to Prometheus and OpenTelemetry). Default nil: no
	// tracing, at no cost.
	Tracer Tracer
	// TypedReadsGeneric plans the reads from the start (decision reads,
	// Project, ReadLast) of query items with both types and tags once per
	// connection instead of at every call: their values go to the server
	// through one-row subqueries, and PostgreSQL keeps the generic plan,
	// which finds the events by their tags (events_tags); planning is then
	// no longer part of every read (bench/PROFILE.md). Set it when the tags
	// of your typed queries are selective (an entity's id): a query item
	// whose tag is on much of the log (a tenant) and whose type is rare then
	// reads every event of that tag instead of the few of that type.
	// Default false: such items are planned at every call,
	// with their values, and a rare type is read by events_type_log_order.
	TypedReadsGeneric bool
	// GroupCommitDisabled turns the group committer off (docs/GROUPCOMMIT.md).
	// By default concurrent Append and AppendIf calls on the pool (never the
	// …Tx forms) are sent together as one server call in one transaction,
	// each decided as if they had run one after another; a call that finds
	// no other in flight is sent at once, alone. Set it to make every call
	// its own transaction. Default false: group commit on.
	GroupCommitDisabled bool
	// GroupMaxAppends is the most appends one group carries. 0: the
	// default, 64.
	GroupMaxAppends int
	// GroupMaxEvents is the most events one group carries (an append larger
	// than that is sent alone). 0: the default, 1000.
	GroupMaxEvents int
	// GroupSenders is the most groups in flight at once, each on its own
	// pooled connection. 0: the default, 2.
	GroupSenders int
	// SnapshotEvery: Project stores a snapshot of a Snapshottable model (in
	// the background) once it has folded at least this many of the model's
	// events past its last snapshot (docs/SNAPSHOTS.md). 0: the default,
	// 100.
	SnapshotEvery int
	// SnapshotsManual turns the automatic writes off: snapshots are written
	// only by Store.SaveSnapshot (and still used by Project). Default false.
	SnapshotsManual bool
	// SnapshotWriteTimeout bounds one background snapshot write. 0: the
	// default, 5s.
	SnapshotWriteTimeout time.Duration
	// SnapshotsDisabled makes Project ignore snapshots altogether: every
	// model is read from the start and no snapshot is written. Default
	// false.
	SnapshotsDisabled bool
	// Upcasters brings events written in older shapes to the current one on
	// every read path, records at append the version each event is written
	// with, and widens queries and conditions naming a renamed type to all
	// its names (package upcast; docs/LIFECYCLE.md, "Evolving events").
	// Do not change the registry once given. Default nil: events are read
	// as stored.
	Upcasters *upcast.Registry
	// SettleTimeout is the settle budget: how long an Append or AppendIf
	// whose send failed with an unknown outcome (a lost connection, a
	// context that ended during the call) may spend, past that failure,
	// finding out whether it committed (docs/FAULTS.md, "Settled
	// outcomes"). Only a server that cannot be reached for that long
	// leaves the call with pgdcb.ErrOutcomeUnknown. 0: the default, 5s; at
	// most MaxSettleTimeout (5m).
	SettleTimeout time.Duration
	// ReadPool, when set, serves the reads that take no transaction: Read,
	// ReadAll, ReadLast, Head, Project and ReadTail (and what is built on
	// them). Point it at a streaming hot standby to take the reads off the
	// primary (docs/REPLICAS.md): a decision read there is still exact (its
	// cursor counts as seen only what the standby can prove, so an AppendIf
	// after it fails whenever a matching event exists that the read did not
	// return, whatever the lag) but may be stale, which shows as more
	// conflicts. Append, AppendIf and their checks, snapshot writes,
	// SaveSnapshot, Listen, notifications and CheckSchema always use the
	// store's pool, which must be the primary. Default nil: every read uses
	// the store's pool.
	ReadPool *pgxpool.Pool
	// KEK wraps the subjects' data keys under which the store seals
	// personal fields (pgdcb.Personal) and opens them again on reads
	// (docs/LIFECYCLE.md, "Erasing a person's data"): a KMS, or
	// NewAESKeyWrapper. Reads look keys up on the primary, through a pool
	// of their own of at most 2 connections, made from the store's pool's
	// configuration at the first look-up (closed by Close). Default nil:
	// an append with personal fields is
	// refused (never stored in clear), and reads return sealed fields as
	// stored, {"pgdcb.sealed": …} with ciphertext.
	KEK KeyWrapper
	// SettleDisabled answers a failed send with pgdcb.ErrOutcomeUnknown at
	// once, without settling (the behaviour before settling existed; for
	// comparison). Default false: failed sends are settled.
	SettleDisabled bool
}

// Store is a DCB event store in one PostgreSQL schema.
type Store struct {
	pool    *pgxpool.Pool
	cfg     Config
	schema  string // quoted
	channel string
	sql     statements
	wire    wireConfig // the pool's connections, for the append calls (wire.go)
	// maxConns is the pool's MaxConns (pgxpool's Config() copies the whole
	// configuration at every call: not on the append path).
	maxConns int

	notifyPending atomic.Bool
	// listenK1, listenK2 are ListenerLockKey(schema).
	listenK1, listenK2 int32
	// noListenerAt is when (sinceBorn) the last listener check that found
	// none began; 0 when the last one found a listener (see Notify).
	noListenerAt  atomic.Int64
	born          time.Time
	notifyRunning atomic.Bool

	group groupCommitter // unless Config.GroupCommitDisabled (group.go)

	snap snapshotState // decision snapshots (snapshot.go)

	// upcasters is Config.Upcasters.Version(), part of every decision
	// snapshot's key (snapshot_key.go).
	upcasters string

	// proofPast is the standby xmin of the last decision read whose proof
	// was past its bounds (0: none): reads whose xmin is not above it skip
	// the proof and run on the primary (standby.go).
	proofPast atomic.Uint64

	settler settler // settle.go

	keys keyring // subjects' data keys (keys.go)

	bg bgWork // background goroutines, for Close (close.go)

	// sendHook, set by tests only, runs on the connection of an append
	// without grouping just before it is sent.
	sendHook func(conn *pgxpool.Conn)
}

// New returns a Store over the pool. It does not touch the database; call
// sql.Migrate (or `pgdcb migrate`) to create the schema, and CheckSchema to
// verify it.
func New(pool *pgxpool.Pool, cfg *Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgdcb: eventstore.New: nil pool")
	}
	c, err := resolveConfig(cfg)
	if err != nil {
		return nil, err
	}
	q, err := pgdcbsql.Quote(c.Schema)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: c, schema: q, channel: notifyChannel(c.Schema), upcasters: c.Upcasters.Version()}
	s.listenK1, s.listenK2 = listenerLockKey(c.Schema)
	s.group.s, s.settler.s, s.snap.s, s.keys.s = s, s, s, s
	s.born = time.Now()
	s.sql = newStatements(q)
	s.sql.head = [2]string{s.headSQL(false), s.headSQL(true)}
	pc := pool.Config()
	s.wire = newWireConfig(pc.ConnConfig)
	s.maxConns = int(pc.MaxConns)
	return s, nil
}

// resolveConfig checks cfg (a negative field or a byte limit above
// storekit.MaxBytesLimit is refused with a *pgdcb.InvalidArgumentError) and
// returns it with every default filled in.
func resolveConfig(cfg *Config) (Config, error) {
	if err := cfg.validate(); err != nil {
		return Config{}, err
	}
	return cfg.withDefaults(), nil
}

// validate refuses a negative number or duration, a SettleTimeout above
// MaxSettleTimeout and a byte limit above MaxBytesLimit, with a
// *pgdcb.InvalidArgumentError naming the field. New calls it first.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	if err := cfgcheck.NonNegative(
		cfgcheck.Int("MaxBatchSize", c.MaxBatchSize, storekit.DefaultMaxBatchSize),
		cfgcheck.Int("MaxLockKeys", c.MaxLockKeys, defaultMaxLockKeys),
		cfgcheck.Int("MaxEventBytes", c.MaxEventBytes, storekit.DefaultMaxEventBytes),
		cfgcheck.Int("MaxBatchBytes", c.MaxBatchBytes, storekit.DefaultMaxBatchBytes),
		cfgcheck.Int("GroupMaxAppends", c.GroupMaxAppends, defaultGroupMaxAppends),
		cfgcheck.Int("GroupMaxEvents", c.GroupMaxEvents, defaultGroupMaxEvents),
		cfgcheck.Int("GroupSenders", c.GroupSenders, DefaultGroupSenders),
		cfgcheck.Int("SnapshotEvery", c.SnapshotEvery, defaultSnapshotEvery),
		cfgcheck.Duration("SnapshotWriteTimeout", c.SnapshotWriteTimeout, defaultSnapshotWriteTimeout),
		cfgcheck.Duration("SettleTimeout", c.SettleTimeout, defaultSettleTimeout),
	); err != nil {
		return err
	}
	if c.SettleTimeout > maxSettleTimeout {
		return &pgdcb.InvalidArgumentError{Name: "Config.SettleTimeout",
			Reason: fmt.Sprintf("must be at most MaxSettleTimeout %s (got %s)", maxSettleTimeout, c.SettleTimeout)}
	}
	_, err := storekit.ResolveLimits(c.limits())
	return err
}

// withDefaults returns a copy of c (nil: the zero Config) with every zero
// field that has a default set to it. New calls it after validate.
func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	o.Schema = cmp.Or(o.Schema, pgdcbsql.DefaultSchema)
	o.MaxBatchSize = cmp.Or(o.MaxBatchSize, storekit.DefaultMaxBatchSize)
	o.MaxLockKeys = cmp.Or(o.MaxLockKeys, defaultMaxLockKeys)
	o.MaxEventBytes = cmp.Or(o.MaxEventBytes, storekit.DefaultMaxEventBytes)
	o.MaxBatchBytes = cmp.Or(o.MaxBatchBytes, max(storekit.DefaultMaxBatchBytes, o.MaxEventBytes))
	o.GroupMaxAppends = cmp.Or(o.GroupMaxAppends, defaultGroupMaxAppends)
	o.GroupMaxEvents = cmp.Or(o.GroupMaxEvents, defaultGroupMaxEvents)
	o.GroupSenders = cmp.Or(o.GroupSenders, DefaultGroupSenders)
	o.SnapshotEvery = cmp.Or(o.SnapshotEvery, defaultSnapshotEvery)
	o.SnapshotWriteTimeout = cmp.Or(o.SnapshotWriteTimeout, defaultSnapshotWriteTimeout)
	o.SettleTimeout = cmp.Or(o.SettleTimeout, defaultSettleTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// DefaultMaxLockKeys is Config.MaxLockKeys's default.
const defaultMaxLockKeys = 128

// limits is c's input limits.
func (c *Config) limits() storekit.Limits {
	return storekit.Limits{MaxBatchSize: c.MaxBatchSize, MaxEventBytes: c.MaxEventBytes, MaxBatchBytes: c.MaxBatchBytes}
}

// Config returns the store's configuration with every default filled in.
func (s *Store) Config() Config { return s.cfg }

// NotifyChannel is the LISTEN channel appends to the schema notify on.
func notifyChannel(schema string) string { return "pgdcb_events_" + schema }

// Pool returns the pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ReadPool returns the pool the store's reads use: Config.ReadPool, else
// the store's pool.
func (s *Store) ReadPool() *pgxpool.Pool {
	if s.cfg.ReadPool != nil {
		return s.cfg.ReadPool
	}
	return s.pool
}

// Schema returns the (unquoted) schema name.
func (s *Store) Schema() string { return s.cfg.Schema }

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
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func errf(op string, err error) error {
	if err == nil {
		return nil
	}
	return errfmt.Wrap(op, translate(op, err))
}
