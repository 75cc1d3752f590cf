package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgjson"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/internal/wake"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// Defaults of Config.
const (
	defaultBatchSize         = 500
	DefaultElectionInterval  = time.Second
	defaultHeartbeatInterval = 5 * time.Second
	defaultRetryMin          = 100 * time.Millisecond
	defaultRetryMax          = 30 * time.Second
	defaultMaxAttempts       = 10
	// RetryForever, as Config.MaxAttempts, makes a projection retry a failing
	// batch for ever: it never becomes FAILED.
	RetryForever = math.MaxInt
)

// ErrInvalidName: a projection name is empty, longer than 200 bytes, not
// UTF-8 or contains NUL.
var ErrInvalidName = errors.New("pgdcb: projection: invalid name")

// Handler applies a batch of events to the read model in tx; the checkpoint
// moves in the same transaction after it returns nil. Return an error to roll
// the batch back: it is retried with backoff, and the projection becomes
// FAILED after MaxAttempts consecutive failures. The handler must not commit
// or roll back tx.
type Handler func(ctx context.Context, tx pgx.Tx, events []pgdcb.StoredEvent) error

// Config configures a Runner. nil or the zero value means every default: in
// every numeric and duration field 0 means the default; New refuses negative
// values with a *pgdcb.InvalidArgumentError.
type Config struct {
	// BatchSize is the most events per batch (and per transaction). 0: the
	// default, 500.
	BatchSize int
	// ReaderConfig holds the settings every reader built on a Runner shares
	// (outbox.Config embeds it too): polling, election, retries, identity,
	// tracing and logs.
	ReaderConfig
	// Reset clears the read model, in the transaction that moves the
	// checkpoint back to the start, when Runner.Reset rebuilds it. Default
	// none.
	Reset func(ctx context.Context, tx pgx.Tx) error
	// Tables are the tables the handler writes ("table" in the store's
	// schema, or "schema.table"). The runner records them with its
	// checkpoint, so that every Reset (projection.Reset, Runner.Reset,
	// `pgdcb projections reset`) empties them in the transaction that moves
	// the checkpoint back (docs/LIFECYCLE.md). Default none: a Reset from
	// elsewhere than Runner.Reset cannot clear the read model, and the CLI
	// refuses it.
	Tables []string
	// Views, one per table, are the names readers read: views over the
	// tables of the projection that serves them, so that a new version can
	// be built beside the live one and replace it with Switch. The first
	// projection to register a view serves it. Default none.
	Views []string
	// MetadataContains, when set, narrows the projection to the events
	// (matching the query) whose metadata contains this JSON object
	// (eventstore.TailOptions.MetadataContains): for a part of the log that
	// no query of types and tags names. Not with Logical. Default none.
	MetadataContains json.RawMessage
	// Logical, when set, feeds the projection from logical decoding (package
	// logical): events in commit order from a replication slot of its own, so
	// that an open transaction in the same database does not delay it. The
	// server needs wal_level=logical and a role with REPLICATION
	// (docs/SUBSCRIPTIONS.md "Logical decoding mode"). Handlers are
	// unchanged. Default nil: tail reads.
	Logical *logical.Config
}

// ReaderConfig is the part of Config that the readers built on a Runner
// (outbox.Config, runstore.Config.Projection) share with it and pass on
// whole. Its zero value means every default, as Config's does.
type ReaderConfig struct {
	// PollInterval is how often the log is read when no notification came
	// (and how quickly PAUSED/FAILED → ACTIVE is noticed). 0: the default, 1s.
	PollInterval time.Duration
	// NotifyDisabled turns LISTEN off: polling only. Default false.
	NotifyDisabled bool
	// ElectionInterval is how often a standby runner tries to become leader:
	// the most a takeover waits after the leader's connection died. 0: the
	// default, 1s.
	ElectionInterval time.Duration
	// HeartbeatInterval is how often the leader writes heartbeat_at (and an
	// idle checkpoint move). 0: the default, 5s.
	HeartbeatInterval time.Duration
	// RetryMin and RetryMax bound the capped exponential backoff after a
	// failed batch. 0: the defaults, 100ms and 30s (a RetryMax below
	// RetryMin is raised to it).
	RetryMin, RetryMax time.Duration
	// MaxAttempts is how many consecutive failed batches make the reader
	// FAILED (it then waits for Resume and continues from the same
	// checkpoint). 0: the default, 10. RetryForever: never FAILED, retry for
	// ever.
	MaxAttempts int
	// Identity names this process in the checkpoint's leader column: UTF-8
	// without NUL. Default "<hostname>/<pid>".
	Identity string
	// Tracer observes batches and, when it implements
	// subscription.StatusTracer, errors, lag, leadership and FAILED
	// (pgdcbprom.New for Prometheus, pgdcbotel.New for spans).
	// Default nil: nothing is traced.
	Tracer subscription.Tracer
	// Logger receives the reader's logs: failures (batches, elections,
	// lost leadership) at Warn or Error with the error under "err", routine
	// events at Debug. Default: none.
	Logger *slog.Logger
}

// validate refuses negative numbers and durations, and an Identity the
// server cannot store, with a *pgdcb.InvalidArgumentError naming the field.
// New calls it first, then withDefaults.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	if err := cfgcheck.NonNegative(
		cfgcheck.Int("BatchSize", c.BatchSize, defaultBatchSize),
		cfgcheck.Duration("PollInterval", c.PollInterval, wake.DefaultPoll),
		cfgcheck.Duration("ElectionInterval", c.ElectionInterval, DefaultElectionInterval),
		cfgcheck.Duration("HeartbeatInterval", c.HeartbeatInterval, defaultHeartbeatInterval),
		cfgcheck.Duration("RetryMin", c.RetryMin, defaultRetryMin),
		cfgcheck.Duration("RetryMax", c.RetryMax, defaultRetryMax),
		cfgcheck.Int("MaxAttempts", c.MaxAttempts, defaultMaxAttempts).Note("RetryForever never gives up"),
	); err != nil {
		return err
	}
	if err := c.Logical.Validate(); err != nil {
		return err
	}
	if len(c.MetadataContains) > 0 {
		if err := pgjson.ValidateObject("Config.MetadataContains", c.MetadataContains); err != nil {
			return err
		}
		if c.Logical != nil {
			return &pgdcb.InvalidArgumentError{Name: "Config.MetadataContains", Reason: "not supported with Config.Logical"}
		}
	}
	if !utf8.ValidString(c.Identity) || strings.IndexByte(c.Identity, 0) >= 0 {
		return &pgdcb.InvalidArgumentError{Name: "Config.Identity", Reason: "must be UTF-8 without NUL"}
	}
	return nil
}

func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	o.BatchSize = cmp.Or(o.BatchSize, defaultBatchSize)
	o.PollInterval = cmp.Or(o.PollInterval, wake.DefaultPoll)
	o.ElectionInterval = cmp.Or(o.ElectionInterval, DefaultElectionInterval)
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, defaultHeartbeatInterval)
	o.RetryMin = cmp.Or(o.RetryMin, defaultRetryMin)
	o.RetryMax = max(cmp.Or(o.RetryMax, defaultRetryMax), o.RetryMin)
	switch {
	case o.MaxAttempts == 0:
		o.MaxAttempts = defaultMaxAttempts
	case o.MaxAttempts > math.MaxInt32:
		o.MaxAttempts = -1 // RetryForever: recordFailure never marks FAILED
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "/" + strconv.Itoa(os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Runner runs one named projection. Start as many as you like (in one or many
// processes): one leads, the others stand by.
type Runner struct {
	store  *eventstore.Store
	name   string
	q      query.Query
	h      Handler
	bh     BatchHandler // instead of h (NewBatchRunner)
	cfg    Config
	tr     tracing
	k1, k2 int32
	rm     readModel // Config.Tables and Views, qualified

	leading atomic.Bool
	ensured atomic.Bool
	waker   atomic.Pointer[wake.Waker]
	commits committed // wakes WaitFor

	// Logical mode, used by the leading goroutine only: the open stream and
	// the checkpoint stored when it was last written.
	lf logicalFeed
}

// New returns a Runner of the projection name over the events matching q.
// It fails with ErrInvalidName, an error matching pgdcb.ErrInvalidQuery, or a
// *pgdcb.InvalidArgumentError naming a Config field out of range.
func New(store *eventstore.Store, name string, q query.Query, h Handler, cfg *Config) (*Runner, error) {
	if h == nil {
		return nil, errors.New("pgdcb: projection.New: nil handler")
	}
	r, err := newRunner(store, name, q, cfg)
	if err != nil {
		return nil, err
	}
	r.h = h
	return r, nil
}

func newRunner(store *eventstore.Store, name string, q query.Query, cfg *Config) (*Runner, error) {
	if store == nil {
		return nil, errors.New("pgdcb: projection.New: nil store")
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if q.IsEmpty() {
		return nil, errfmt.Errorf("pgdcb: projection.New %q: %w: the query is empty (it matches nothing)", name, pgdcb.ErrInvalidQuery)
	}
	if err := q.Validate(); err != nil {
		return nil, errfmt.Errorf("pgdcb: projection.New %q: %w", name, err)
	}
	if err := cfg.validate(); err != nil {
		return nil, errfmt.Errorf("pgdcb: projection.New %q: %w", name, err)
	}
	c := cfg.withDefaults()
	rm, err := newReadModel(store.Schema(), c.Tables, c.Views)
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: projection.New %q: %w", name, err)
	}
	r := &Runner{store: store, name: name, q: q, cfg: c, tr: newTracing(c.Tracer), rm: rm}
	r.k1, r.k2 = lockKey(store.Schema(), name)
	return r, nil
}

// ValidateName returns an error matching ErrInvalidName unless name can name a
// checkpoint.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > 200:
		return fmt.Errorf("%w: %q is longer than 200 bytes", ErrInvalidName, name[:20]+"…")
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not UTF-8", ErrInvalidName, name)
	}
	for _, c := range name {
		if c == 0 {
			return fmt.Errorf("%w: %q contains NUL", ErrInvalidName, name)
		}
	}
	return nil
}

// lockKey is the session advisory lock (two-int4 form, a key space apart from
// the store's own bigint keys) that elects the leader of projection name.
func lockKey(schema, name string) (int32, int32) {
	h := fnv.New64a()
	h.Write([]byte("pgdcb.projection\x00" + schema + "\x00" + name))
	v := h.Sum64()
	return int32(v >> 32), int32(v)
}

// Name returns the projection's name.
func (r *Runner) Name() string { return r.name }

// IsLeader reports whether this runner leads right now.
func (r *Runner) IsLeader() bool { return r.leading.Load() }

// Status reads the projection's checkpoint.
func (r *Runner) Status(ctx context.Context) (Status, error) {
	return GetStatus(ctx, r.store, r.name)
}

// Pause pauses the projection (in every process).
func (r *Runner) Pause(ctx context.Context) error { return Pause(ctx, r.store, r.name) }

// Resume makes the projection ACTIVE again, from its checkpoint.
func (r *Runner) Resume(ctx context.Context) error {
	err := Resume(ctx, r.store, r.name)
	r.wake()
	return err
}

// Reset rebuilds the projection from zero, emptying Config.Tables and
// calling Config.Reset in the same transaction.
func (r *Runner) Reset(ctx context.Context) error {
	if err := r.register(ctx); err != nil {
		return err
	}
	err := Reset(ctx, r.store, r.name, r.cfg.Reset)
	r.wake()
	return err
}

func (r *Runner) wake() {
	if w := r.waker.Load(); w != nil {
		w.Wake()
	}
}

// Run takes part in the election and, while leading, processes batches until
// ctx ends; it returns ctx's error. Connection failures are retried with
// backoff; handler failures are recorded in the checkpoint (see Status).
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := wake.New(r.store, r.cfg.PollInterval, !r.cfg.NotifyDisabled, r.cfg.Logger)
	w.Start(ctx)
	defer w.Stop() // Run returns only once its LISTEN connection is closed
	r.waker.Store(w)
	var failures int
	for {
		conn, err := r.elect(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			failures++
			r.tr.readerError(ctx, r.name, err)
			d := retry.Delay(failures, r.cfg.RetryMin, r.cfg.RetryMax)
			r.cfg.Logger.WarnContext(ctx, "pgdcb: projection: election failed", "name", r.name, "err", err, "retry_in", d)
			if retry.Sleep(ctx, d) != nil {
				return ctx.Err()
			}
			continue
		}
		failures = 0
		if conn == nil { // another runner leads
			if retry.Sleep(ctx, r.cfg.ElectionInterval) != nil {
				return ctx.Err()
			}
			continue
		}
		r.leading.Store(true)
		r.tr.leader(ctx, r.name, true)
		r.cfg.Logger.DebugContext(ctx, "pgdcb: projection: leading", "name", r.name, "pid", conn.PgConn().PID())
		err = r.lead(ctx, conn, w)
		r.closeReader(ctx)
		r.leading.Store(false)
		r.tr.leader(ctx, r.name, false)
		// Closing the connection releases the session lock.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		_ = conn.Close(cctx)
		ccancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.tr.readerError(ctx, r.name, err)
		r.cfg.Logger.WarnContext(ctx, "pgdcb: projection: lost leadership", "name", r.name, "err", err)
		// Give a standby the first chance to take over.
		if retry.Sleep(ctx, 2*r.cfg.ElectionInterval) != nil {
			return ctx.Err()
		}
	}
}

// elect tries the lock once. It returns the connection holding it (taken out
// of the pool: it is closed, never returned, when leadership ends), or nil
// when another runner leads.
func (r *Runner) elect(ctx context.Context) (*pgx.Conn, error) {
	pool := r.store.Pool()
	if !r.ensured.Load() {
		if err := r.register(ctx); err != nil {
			return nil, err
		}
		r.ensured.Store(true)
	}
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	var got bool
	if err := pc.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, r.k1, r.k2).Scan(&got); err != nil {
		pc.Release()
		return nil, err
	}
	if !got {
		pc.Release()
		return nil, nil
	}
	return pc.Hijack(), nil
}

type dbexec interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ensure creates the checkpoint row at the start of the log if there is none.
func ensure(ctx context.Context, db dbexec, schema, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	// checkpoints primary key.
	_, err := db.Exec(ctx, `INSERT INTO `+schema+`.checkpoints (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, name)
	if err != nil {
		return fmt.Errorf("pgdcb: projection: creating checkpoint %q: %w", name, err)
	}
	return nil
}

// lead processes batches on conn (which holds the lock) until ctx ends or
// the connection fails.
func (r *Runner) lead(ctx context.Context, conn *pgx.Conn, w *wake.Waker) error {
	var (
		lag       wake.LagTracker
		held      wake.HorizonWait
		lastWrite time.Time
		lastSlot  time.Time
	)
	if err := r.heartbeat(ctx, conn); err != nil {
		return err
	}
	lastWrite = time.Now()
	for {
		var (
			res batchResult
			err error
		)
		if r.cfg.Logical != nil {
			res, err = r.batchLogical(ctx, conn, lastWrite)
		} else {
			res, err = r.batch(ctx, conn, &lag, time.Since(lastWrite) >= r.cfg.HeartbeatInterval)
		}
		r.tr.end(r.name, res, err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if conn.IsClosed() {
			return fmt.Errorf("pgdcb: projection %q: leader connection lost: %w", r.name, err)
		}
		if res.wrote {
			lastWrite = time.Now()
		}
		r.tr.failed(ctx, r.name, res.state == Failed)
		switch {
		case errors.Is(err, errFenced):
			r.cfg.Logger.DebugContext(ctx, "pgdcb: projection: batch fenced", "name", r.name)
			continue
		case err != nil:
			r.tr.readerError(ctx, r.name, err)
			n, ferr := r.recordFailure(ctx, conn, err)
			if ferr != nil {
				if conn.IsClosed() || ctx.Err() != nil {
					return ferr
				}
				r.cfg.Logger.ErrorContext(ctx, "pgdcb: projection: recording a failure failed", "name", r.name, "err", ferr)
			}
			d := retry.Delay(n, r.cfg.RetryMin, r.cfg.RetryMax)
			r.cfg.Logger.WarnContext(ctx, "pgdcb: projection: batch failed", "name", r.name, "err", err, "attempt", n, "retry_in", d)
			if err := retry.Sleep(ctx, d); err != nil {
				return err
			}
			continue
		}
		if time.Since(lastWrite) >= r.cfg.HeartbeatInterval {
			if err := r.heartbeat(ctx, conn); err != nil {
				if conn.IsClosed() || ctx.Err() != nil {
					return err
				}
			}
			lastWrite = time.Now()
		}
		// Not with the heartbeat: a logical batch that moves the checkpoint
		// writes it, and the heartbeat then never comes.
		if r.cfg.Logical != nil && time.Since(lastSlot) >= r.cfg.HeartbeatInterval {
			lastSlot = time.Now()
			r.slotMetric(ctx)
		}
		if res.full || res.waited {
			continue
		}
		wait := r.cfg.PollInterval
		if res.state == Active {
			wait = held.Next(res.tail, r.cfg.PollInterval)
		}
		if err := w.WaitFor(ctx, wait); err != nil {
			return err
		}
	}
}

// closeTimeout bounds the rollback and close of the leader's connection.
const closeTimeout = 5 * time.Second

// maxErrorText is the most bytes of an error message stored in last_error.
const maxErrorText = 2000

// errorText is err's message as PostgreSQL text accepts it: valid UTF-8, no
// NUL, at most maxErrorText bytes cut at a rune boundary. A message the
// server refuses would leave the failure unrecorded, so the projection would
// never become FAILED and would retry at RetryMin for ever.
func errorText(err error) string {
	msg := strings.ToValidUTF8(err.Error(), "\uFFFD")
	msg = strings.ReplaceAll(msg, "\x00", "\uFFFD")
	if len(msg) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return msg
}

var errFenced = errors.New("pgdcb: projection: checkpoint moved by someone else; batch rolled back")

type batchResult struct {
	tail  pgdcb.TailBatch
	state State
	n     int
	full  bool
	wrote bool
	// waited: the read already waited for events (logical mode).
	waited bool
	// trace is the batch's trace, when it was traced (tracing.start).
	trace *batchTrace
}

// batch runs one batch in one READ COMMITTED transaction on the leader's
// connection: read the checkpoint, read the tail after it (before any write,
// so this transaction holds no xid that would hold the horizon below its
// own writes; on the standby when the store has a read pool, see readTail),
// call the handler, move the checkpoint by compare-and-set, commit. writeIdle also moves a checkpoint that only advanced to the
// horizon (no events); otherwise such a move waits for the next heartbeat.
func (r *Runner) batch(ctx context.Context, conn *pgx.Conn, lag *wake.LagTracker, writeIdle bool) (batchResult, error) {
	var res batchResult
	tx, rollback, err := begin(ctx, conn)
	if err != nil {
		return res, err
	}
	defer rollback()
	var (
		cur  cursor.Cursor
		text string // the logical checkpoint, "" when none
	)
	schema := ident.Schema(r.store)
	// checkpoints primary key; a plain read (a FOR UPDATE would give the
	// transaction an xid before the tail read).
	err = tx.QueryRow(ctx, `SELECT transaction_id, position, status, coalesce(logical_checkpoint, '') FROM `+schema+`.checkpoints WHERE name = $1`, r.name).
		Scan(&cur.TransactionID, &cur.Position, &res.state, &text)
	if err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: reading checkpoint: %w", r.name, err)
	}
	if res.state != Active {
		return res, nil
	}
	done, bound, err := leftLogical(text)
	if err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: %w", r.name, err)
	}
	tb, ok, err := r.readTail(ctx, tx, cur)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, nil // the standby has not replayed the fence yet
	}
	res.full = len(tb.Events) == r.cfg.BatchSize
	skipped := 0
	newText := text
	if done != nil {
		// Back from logical decoding: what it consumed beyond the cursor
		// is not handled again; kept (detached) until the cursor passed it.
		n := len(tb.Events)
		tb.Events = slices.DeleteFunc(slices.Clone(tb.Events), func(ev pgdcb.StoredEvent) bool {
			return done.Has(ev.TransactionID, ev.Position)
		})
		skipped = n - len(tb.Events)
		newText = ""
		if done.Beyond(tb.Cursor) {
			newText = logical.Checkpoint{Done: done}.String()
		}
	}
	res.tail = tb
	res.n = len(tb.Events)
	r.tr.lag(ctx, r.name, subscription.Lag(lag.Observe(tb, time.Now())))
	ctx = r.tr.start(ctx, r.name, &res, cur)
	if r.bh != nil {
		if err := r.bh.HandleBatch(ctx, tx, tb); err != nil {
			return res, &handlerError{Name: r.name, Cursor: cur, Err: err}
		}
	} else if res.n > 0 {
		if err := r.h(ctx, tx, tb.Events); err != nil {
			return res, &handlerError{Name: r.name, Cursor: cur, Err: err}
		}
	}
	moved := tb.Cursor.TransactionID != cur.TransactionID || tb.Cursor.Position != cur.Position
	// Detaching (or dropping) the logical checkpoint is written at once,
	// so that the abandoned slot goes even while no event comes.
	detach := newText != text
	if (!moved && !detach) || (res.n == 0 && skipped == 0 && !writeIdle && !detach) {
		if r.bh == nil {
			return res, nil
		}
		// A batch handler's writes commit whether or not the checkpoint
		// moves (see BatchHandler).
		if err := tx.Commit(ctx); err != nil {
			return res, fmt.Errorf("pgdcb: projection %q: commit: %w", r.name, err)
		}
		return res, r.afterCommit(ctx, tb)
	}
	// checkpoints primary key. Compare-and-set: a Pause, Reset or another
	// leader that changed the row since we read it makes this update match
	// nothing (READ COMMITTED re-checks the WHERE on the newest row version),
	// and the batch rolls back. The logical checkpoint moves with the
	// cursor: never left bound to a slot position the cursor has passed.
	tag, err := tx.Exec(ctx, `UPDATE `+schema+`.checkpoints
		SET transaction_id = $2::xid8, position = $3, error_count = 0, leader = $6,
		    logical_checkpoint = nullif($7, ''), heartbeat_at = now(), updated_at = now()
		WHERE name = $1 AND transaction_id = $4::xid8 AND position = $5 AND status = 'ACTIVE'
		  AND coalesce(logical_checkpoint, '') = $8`,
		r.name, tb.Cursor.TransactionID, tb.Cursor.Position, cur.TransactionID, cur.Position, r.cfg.Identity, newText, text)
	if err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: moving checkpoint: %w", r.name, err)
	}
	if tag.RowsAffected() != 1 {
		return res, errFenced
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("pgdcb: projection %q: commit: %w", r.name, err)
	}
	res.wrote = true
	r.commits.signal()
	if bound {
		r.dropAbandonedSlot(ctx)
	}
	return res, r.afterCommit(ctx, tb)
}

// handlerError is a failed batch: the handler's error and the cursor the
// batch started after.
type handlerError struct {
	Name   string
	Cursor cursor.Cursor
	Err    error
}

func (e *handlerError) Error() string {
	return fmt.Sprintf("pgdcb: projection %q: handler failed after cursor %s: %s", e.Name, e.Cursor, errfmt.Trim(e.Err.Error()))
}

func (e *handlerError) Unwrap() error { return e.Err }

// recordFailure counts a failed attempt in the checkpoint and makes it FAILED
// at MaxAttempts. It returns the consecutive failure count.
func (r *Runner) recordFailure(ctx context.Context, conn *pgx.Conn, cause error) (int, error) {
	msg := errorText(cause)
	var n int
	// checkpoints primary key.
	err := conn.QueryRow(ctx, `UPDATE `+ident.Schema(r.store)+`.checkpoints
		SET error_count = error_count + 1, last_error = $2, updated_at = now(),
		    status = CASE WHEN $3 > 0 AND error_count + 1 >= $3 THEN 'FAILED' ELSE status END
		WHERE name = $1 AND status = 'ACTIVE'
		RETURNING error_count`, r.name, msg, r.cfg.MaxAttempts).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 1, nil
	}
	if err != nil {
		return 1, err
	}
	return n, nil
}

func (r *Runner) heartbeat(ctx context.Context, conn *pgx.Conn) error {
	// checkpoints primary key.
	_, err := conn.Exec(ctx, `UPDATE `+ident.Schema(r.store)+`.checkpoints
		SET heartbeat_at = now(), leader = $2 WHERE name = $1`, r.name, r.cfg.Identity)
	return err
}
