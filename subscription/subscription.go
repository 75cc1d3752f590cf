package subscription

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/internal/wake"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/query"
)

// Defaults of Config.
const (
	defaultBatchSize = 1000
	defaultRetryMin  = 100 * time.Millisecond
	defaultRetryMax  = 10 * time.Second
	defaultName      = "subscription"
)

// Config configures a Subscription. nil or the zero value means every default:
// in every numeric and duration field 0 means the default; New refuses
// negative values with a *pgdcb.InvalidArgumentError.
type Config struct {
	// Name labels the subscription in logs and metrics. Default "subscription".
	Name string
	// BatchSize is the most events handed to the handler at once. 0: the
	// default, 1000.
	BatchSize int
	// PollInterval is how often the log is read when no notification came.
	// Polling alone is enough; NOTIFY only makes the reader faster. 0: the
	// default, 1s.
	PollInterval time.Duration
	// NotifyDisabled turns LISTEN off (polling only), for example behind
	// PgBouncer in transaction mode. Default false: LISTEN on a dedicated
	// connection.
	NotifyDisabled bool
	// RetryMin and RetryMax bound the capped exponential backoff after a
	// failed read (the server or the connection went away). 0: the defaults,
	// 100ms and 10s (a RetryMax below RetryMin is raised to it).
	RetryMin, RetryMax time.Duration
	// Tracer observes batches and, when it implements StatusTracer, errors
	// and lag (pgdcbprom.New for Prometheus, pgdcbotel.New for
	// spans). Default nil: nothing is traced.
	Tracer Tracer
	// Logger receives the subscription's logs: failures at Warn with the
	// error under "err". Default: none.
	Logger *slog.Logger
	// Logical, when set, makes the subscription read through logical
	// decoding (package logical): run it with RunLogical, which resumes
	// from a logical.Checkpoint; Run refuses it. The slot is
	// logical.SlotName(schema, Name) unless Logical.Slot names one; the
	// store must be an *eventstore.Store (docs/SUBSCRIPTIONS.md "Logical
	// decoding mode"). Default nil: tail reads.
	Logical *logical.Config
}

// validate refuses negative numbers and durations, and a Logical the server
// would refuse, with a *pgdcb.InvalidArgumentError naming the field. New
// calls it first, then withDefaults.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	if err := c.Logical.Validate(); err != nil {
		return err
	}
	return cfgcheck.NonNegative(
		cfgcheck.Int("BatchSize", c.BatchSize, defaultBatchSize),
		cfgcheck.Duration("PollInterval", c.PollInterval, wake.DefaultPoll),
		cfgcheck.Duration("RetryMin", c.RetryMin, defaultRetryMin),
		cfgcheck.Duration("RetryMax", c.RetryMax, defaultRetryMax),
	)
}

// withDefaults returns a copy of c (nil: the zero Config) with every zero
// field that has a default set to it.
func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	o.Name = cmp.Or(o.Name, defaultName)
	o.BatchSize = cmp.Or(o.BatchSize, defaultBatchSize)
	o.PollInterval = cmp.Or(o.PollInterval, wake.DefaultPoll)
	o.RetryMin = cmp.Or(o.RetryMin, defaultRetryMin)
	o.RetryMax = max(cmp.Or(o.RetryMax, defaultRetryMax), o.RetryMin)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Batch is what a Handler receives: events in log order and the cursor to
// resume after them.
type Batch struct {
	// Events match the subscription's query, in (transaction_id, position)
	// order; never empty. In the logical decoding mode (RunLogical) they
	// are in commit order, and may be empty (the batch only moves the
	// checkpoint).
	Events []pgdcb.StoredEvent
	// Cursor is where to resume after this batch (store it as your checkpoint).
	Cursor cursor.Cursor
	// Lag is how far behind the head the reader was when it read the batch.
	Lag Lag
	// Checkpoint is set in the logical decoding mode (RunLogical) only:
	// where to resume after this batch. Store it with Cursor (in the same
	// transaction as what the handler did) and pass both to RunLogical.
	Checkpoint logical.Checkpoint
}

// Handler handles one batch. An error stops the subscription (Run returns a
// *HandlerError); the batch was not acknowledged.
type Handler func(ctx context.Context, b Batch) error

// HandlerError is returned by Run when the handler failed. Cursor is the
// position before the failed batch: resume from it to retry the batch.
type HandlerError struct {
	Cursor cursor.Cursor
	// Checkpoint is, in the logical decoding mode, the checkpoint before
	// the failed batch (resume RunLogical from it and Cursor).
	Checkpoint logical.Checkpoint
	Err        error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("pgdcb: subscription: handler failed at cursor %s: %v", e.Cursor, e.Err)
}

func (e *HandlerError) Unwrap() error { return e.Err }

// Subscription follows the events matching a query.
type Subscription struct {
	store pgdcb.Store
	q     query.Query
	cfg   Config
	tr    tracing
	prog  progress // for WaitFor
}

// New returns a subscription to the events matching q. It fails with an error
// matching pgdcb.ErrInvalidQuery when q is invalid, and with a
// *pgdcb.InvalidArgumentError when a Config field is negative.
func New(store pgdcb.Store, q query.Query, cfg *Config) (*Subscription, error) {
	if store == nil {
		return nil, errors.New("pgdcb: subscription.New: nil store")
	}
	if q.IsEmpty() {
		return nil, errfmt.Errorf("pgdcb: subscription.New: %w: the query is empty (it matches nothing)", pgdcb.ErrInvalidQuery)
	}
	if err := q.Validate(); err != nil {
		return nil, errfmt.Errorf("pgdcb: subscription.New: %w", err)
	}
	if err := cfg.validate(); err != nil {
		return nil, errfmt.Errorf("pgdcb: subscription.New: %w", err)
	}
	c := cfg.withDefaults()
	return &Subscription{store: store, q: q, cfg: c, tr: newTracing(c.Tracer)}, nil
}

// Run delivers the events after from to h, batch by batch, then stays live
// until ctx ends (it then returns ctx's error) or the handler fails (a
// *HandlerError). Failed reads are retried with backoff, so Run survives a
// restart of the server. Delivery is at least once from the caller's point of
// view: persist Batch.Cursor after handling, and resume from it.
//
// Run one at a time per Subscription: WaitFor follows the running one.
func (s *Subscription) Run(ctx context.Context, from cursor.Cursor, h Handler) (err error) {
	if h == nil {
		return errors.New("pgdcb: subscription.Run: nil handler")
	}
	if s.cfg.Logical != nil {
		return &pgdcb.InvalidArgumentError{Name: "subscription.Config.Logical", Reason: "is set: run the subscription with RunLogical"}
	}
	from.Snapshot = nil
	s.prog.start(from)
	defer func() { s.prog.stop(err) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := wake.New(s.store, s.cfg.PollInterval, !s.cfg.NotifyDisabled, s.cfg.Logger)
	w.Start(ctx)
	defer w.Stop() // Run returns only once its LISTEN connection is closed
	cur := from
	cur.Snapshot = nil
	var (
		lag      wake.LagTracker
		failures int
		held     wake.HorizonWait
	)
	for {
		b, err := s.store.ReadTail(ctx, s.q, cur, s.cfg.BatchSize)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, pgdcb.ErrInvalidQuery) {
				return err
			}
			failures++
			s.tr.readerError(ctx, s.cfg.Name, err)
			d := retry.Delay(failures, s.cfg.RetryMin, s.cfg.RetryMax)
			s.cfg.Logger.WarnContext(ctx, "pgdcb: subscription: read failed", "name", s.cfg.Name, "err", err, "retry_in", d)
			if err := retry.Sleep(ctx, d); err != nil {
				return err
			}
			continue
		}
		failures = 0
		l := Lag(lag.Observe(b, time.Now()))
		s.tr.lag(ctx, s.cfg.Name, l)
		if len(b.Events) > 0 {
			if err := s.tr.batch(ctx, s.cfg.Name, len(b.Events), cur, func(ctx context.Context) error {
				return h(ctx, Batch{Events: b.Events, Cursor: b.Cursor, Lag: l})
			}); err != nil {
				s.tr.readerError(ctx, s.cfg.Name, err)
				return &HandlerError{Cursor: cur, Err: err}
			}
		}
		cur = b.Cursor
		s.prog.advance(cur)
		if len(b.Events) == s.cfg.BatchSize {
			continue // catching up
		}
		if err := w.WaitFor(ctx, held.Next(b, s.cfg.PollInterval)); err != nil {
			return err
		}
	}
}
