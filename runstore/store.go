package runstore

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/projection"
)

// StateStore is the State Store contract (contracts/state-store, v1.0).
// Package conformance tests any implementation of it, and also, when an
// implementation has them, the optional methods of *Store: CatchUp
// (materialised snapshots brought up to date on request), DeleteRun and
// ExportRun (retention and archival).
type StateStore interface {
	// AppendEvent appends ev (RunSeq and PersistedAt are assigned by the
	// store). A duplicate idempotencyKey within the run returns the existing
	// runSeq with Idempotent=true, Persisted=false, never an error.
	AppendEvent(ctx context.Context, ev CanonicalEngineEvent) (AppendResult, error)
	// FetchEvents returns the run's events with runSeq > AfterSeq, ordered by
	// runSeq ascending, at most Limit of them. nil opts: AfterSeq 0,
	// Limit 1000.
	FetchEvents(ctx context.Context, runID string, opts *FetchOptions) ([]CanonicalEngineEvent, error)
	// GetSnapshot returns the materialised snapshot, nil when the run is
	// unknown (or not projected yet).
	GetSnapshot(ctx context.Context, runID string) (*RunSnapshot, error)
	// ProjectSnapshot replays the run's events on demand. A run without events
	// gives a PENDING snapshot with LastEventSeq 0.
	ProjectSnapshot(ctx context.Context, runID string) (*RunSnapshot, error)
}

// Defaults of Config.
const (
	defaultMaxFetchLimit     = 10000
	defaultSeqCacheSize      = 10000
	defaultMaxAppendAttempts = 1000
	defaultProjectorName     = "runstore.snapshots"
	defaultProjectorBatch    = 1000
	defaultPollInterval      = 100 * time.Millisecond
	// defaultResyncLag is the contract's resync trigger on lag (§5.2).
	defaultResyncLag = 10 * time.Second
)

// LagAlertThreshold is the contract's PROJECTOR_LAG_HIGH threshold (§5.2):
// Lag.Alert is true above it.
const LagAlertThreshold = 5 * time.Second

// Config configures a Store. nil or the zero value means every default: in
// every numeric and duration field 0 means the default; New refuses negative
// values (a *ValidationError naming "Config.<Field>" that wraps a
// *pgdcb.InvalidArgumentError).
type Config struct {
	// Reducer applies one event to a snapshot in place, for the projector
	// and for ProjectSnapshot. It is called in runSeq order, once per event,
	// starting from a PENDING snapshot of the run; it must be deterministic
	// and keep the snapshot JSON-serialisable (it is stored as jsonb and the
	// projector resumes from the stored form). The store sets LastEventSeq
	// and EventCount after it. Default nil: RunStarted → RUNNING,
	// StepStarted, StepCompleted and StepFailed update Steps, RunCompleted
	// → COMPLETED, RunFailed → FAILED, RunCancelled → CANCELLED; other
	// event types are ignored.
	Reducer func(s *RunSnapshot, ev CanonicalEngineEvent)
	// MaxFetchLimit is the largest FetchOptions.Limit accepted. 0: the
	// default, 10000.
	MaxFetchLimit int
	// SeqCacheSize is how many runs' last (runSeq, log point) the store
	// remembers, so that an append to a run this process wrote last costs one
	// round trip. 0: the default, 10000. To run without the cache, set
	// SeqCacheDisabled.
	SeqCacheSize int
	// SeqCacheDisabled turns the runSeq cache off: every append to a run
	// reads its last runSeq first (one more round trip). Default false.
	SeqCacheDisabled bool
	// MaxAppendAttempts bounds the retries of one AppendEvent that keeps losing
	// the race for the next runSeq to other writers of the same run; the last
	// failure is returned (matching pgdcb.ErrConditionFailed). 0: the
	// default, 1000.
	MaxAppendAttempts int
	// ProjectorName is the snapshot projector's row in the checkpoints table:
	// UTF-8 without NUL. Default "runstore.snapshots".
	ProjectorName string
	// ProjectorBatch is how many run events the projector reads per
	// transaction. 0: the default, 1000.
	ProjectorBatch int
	// PollInterval is how long the projector's Run waits for a notification
	// before it polls again. 0: the default, 100ms.
	PollInterval time.Duration
	// ResyncLag: a run holding a committed event older than this that its
	// snapshot does not hold is marked STALE and its snapshot rebuilt from
	// its events (the contract's resync trigger, §5.2; see StaleRuns). 0:
	// the default, 10s.
	ResyncLag time.Duration
	// Logger receives the store's logs: runs marked STALE at Warn, resyncs
	// at Info, and the snapshot projector's (package projection). Default:
	// none.
	Logger *slog.Logger
	// Projection holds the snapshot projector's other settings, those of
	// its projection.Runner: the backoff after a failed batch (RetryMin,
	// RetryMax), MaxAttempts before it is FAILED, Identity, the election
	// and heartbeat intervals, NotifyDisabled and Tracer. Its PollInterval
	// and Logger are the store's (PollInterval, Logger) and ignored. Default
	// nil: projection's defaults.
	Projection *projection.ReaderConfig
	// Tracer observes AppendEvent and FetchEvents and, when it implements
	// ProjectorTracer, the snapshot projector (pgdcbprom.New
	// for Prometheus, pgdcbotel.New for spans). Default nil: nothing is
	// traced.
	Tracer Tracer
}

// Store is the PostgreSQL State Store: run events on an eventstore.Store.
// It is safe for concurrent use.
type Store struct {
	es    *eventstore.Store
	cfg   Config
	sql   statements
	cache *seqCache
	proj  *projector
	log   *slog.Logger
}

var _ StateStore = (*Store)(nil)

// New returns a Store over es. The schema needs the core's migrations
// (sql.Migrate) and runstore's (Migrate, as the schema's owner): New does
// not migrate, and does not check (it takes no context); CheckSchema does.
func New(es *eventstore.Store, cfg *Config) (*Store, error) {
	if es == nil {
		return nil, invalid("eventstore", "nil *eventstore.Store")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	s := &Store{
		es:    es,
		cfg:   c,
		sql:   newStatements(ident.Schema(es)),
		cache: newSeqCache(c.SeqCacheSize, c.SeqCacheDisabled),
		log:   c.Logger,
	}
	proj, err := newProjector(s)
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: runstore: %w", err)
	}
	s.proj = proj
	return s, nil
}

// validate refuses negative numbers and durations and a ProjectorName the
// server cannot store, with a *ValidationError naming "Config.<Field>" that
// wraps a *pgdcb.InvalidArgumentError. New calls it first.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	err := cfgcheck.NonNegative(
		cfgcheck.Int("MaxFetchLimit", c.MaxFetchLimit, defaultMaxFetchLimit),
		cfgcheck.Int("SeqCacheSize", c.SeqCacheSize, defaultSeqCacheSize).Note("set SeqCacheDisabled to run without the cache"),
		cfgcheck.Int("MaxAppendAttempts", c.MaxAppendAttempts, defaultMaxAppendAttempts),
		cfgcheck.Int("ProjectorBatch", c.ProjectorBatch, defaultProjectorBatch),
		cfgcheck.Duration("PollInterval", c.PollInterval, defaultPollInterval),
		cfgcheck.Duration("ResyncLag", c.ResyncLag, defaultResyncLag),
	)
	if err == nil {
		if terr := checkText(c.ProjectorName); terr != nil {
			err = &pgdcb.InvalidArgumentError{Name: "Config.ProjectorName", Reason: terr.Error()}
		}
	}
	if err == nil {
		return nil
	}
	ia := err.(*pgdcb.InvalidArgumentError)
	return &ValidationError{Field: ia.Name, Reason: ia.Reason, Err: ia}
}

// withDefaults returns a copy of c (nil: the zero Config) with every zero
// field that has a default set to it. New calls it after validate.
func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	if o.Reducer == nil {
		o.Reducer = defaultReducer
	}
	o.MaxFetchLimit = cmp.Or(o.MaxFetchLimit, defaultMaxFetchLimit)
	o.SeqCacheSize = cmp.Or(o.SeqCacheSize, defaultSeqCacheSize)
	o.MaxAppendAttempts = cmp.Or(o.MaxAppendAttempts, defaultMaxAppendAttempts)
	o.ProjectorName = cmp.Or(o.ProjectorName, defaultProjectorName)
	o.ProjectorBatch = cmp.Or(o.ProjectorBatch, defaultProjectorBatch)
	o.PollInterval = cmp.Or(o.PollInterval, defaultPollInterval)
	o.ResyncLag = cmp.Or(o.ResyncLag, defaultResyncLag)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Projector returns the store's snapshot projector, the projection.Runner
// named Config.ProjectorName that keeps run_snapshots current. Run it (Run
// takes part in the projection's election and, while leading, projects a
// batch after each NOTIFY of an append or each PollInterval; a failed batch
// is retried with backoff, and after Config.Projection.MaxAttempts failures
// in a row the projector is FAILED until Resume). Status, Pause, Resume and
// Reset (which rebuilds every snapshot from the start of the log) manage it;
// Step projects one batch of up to Config.ProjectorBatch run events in the
// caller, rebuilding the runs it finds STALE in the same call.
func (s *Store) Projector() *projection.Runner { return s.proj.r }

// CatchUp returns once every run event committed before the call (visible
// in the snapshot CatchUp takes first) is reflected in its run's snapshot:
// the run's snapshot exists, its lastEventSeq is at or past the event's
// runSeq and no gap it records holds that runSeq. It projects batches itself
// (the tail, and beyond a held horizon the run events that extend their runs
// contiguously) while no other instance leads, and otherwise watches the
// snapshots the leader writes. So no transaction open elsewhere, in this
// database or another, holds it, as long as the events it waits for extend
// their runs: a run's events commit in runSeq order when written by
// AppendEvent. A run event it cannot apply beyond the horizon (a writer
// around AppendEvent left an earlier runSeq of its run uncommitted, or a gap
// filled later) is applied when the tail reaches it, and CatchUp waits for
// that: until every transaction of the store's database that is older than
// the event ends. It returns ctx's error if what it waits for lasts longer
// than ctx, and an error matching projection.ErrNotActive when the projector
// is PAUSED or FAILED.
func (s *Store) CatchUp(ctx context.Context) error { return s.proj.catchUp(ctx) }
