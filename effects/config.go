package effects

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
)

// Defaults of Config.
const (
	defaultLease        = 30 * time.Second
	defaultMaxAttempts  = 5
	defaultRetryMin     = time.Second
	defaultRetryMax     = time.Minute
	defaultPollInterval = time.Second
	defaultBatchSize    = 1000
)

// Config configures a Queue and a Worker (a Queue reads only Logger). nil or
// the zero value means every default: in every numeric and duration field 0
// means the default; negative values are refused with a
// *pgdcb.InvalidArgumentError.
type Config struct {
	// Handlers maps an effect type to the handler that executes it. A
	// Worker claims only effects whose type it has a handler for. No
	// default: NewWorker refuses an empty map (a Queue ignores it).
	Handlers map[string]Handler
	// Identity names the worker in effect_started events. Two workers must
	// never share one. Default "": the host name, the process id and 6
	// random hex digits.
	Identity string
	// Lease is how long a claim holds an effect without news from its
	// worker: while the handler runs, the worker extends it a third of the
	// way through (effect_lease_extended); once it has passed, another worker
	// may claim the effect again (the next attempt). The store, not the
	// worker's clock, decides whether the lease is kept: an extension that
	// commits late (after the lease's end) with no other claim in between
	// keeps it. The worker ends the handler's context (context.Cause: "lease
	// lost ...") when an extension finds another worker's claim, or when no
	// extension could be appended by the lease's end. 0: the default, 30s.
	Lease time.Duration
	// MaxAttempts is how many attempts an effect gets (a claim whose lease
	// expired counts as one); the failure of the last one fails the effect
	// for good. 0: the default, 5.
	MaxAttempts int
	// RetryMin and RetryMax bound the capped exponential backoff after a
	// failed attempt: RetryMin after the first, doubling after each further
	// failure up to RetryMax. 0: the defaults, 1s and 1m (a RetryMax below
	// RetryMin is raised to it).
	RetryMin, RetryMax time.Duration
	// PollInterval is the longest a worker waits before looking for work
	// again when no notification wakes it. 0: the default, 1s.
	PollInterval time.Duration
	// BatchSize is the page size of the worker's reads of new effect events. 0: the
	// default, 1000.
	BatchSize int
	// Logger receives failures at Warn (store errors, lost leases) with the
	// error under "err". Default: none.
	Logger *slog.Logger
	// Tracer observes each attempt (pgdcbotel.New for spans). Default nil:
	// nothing is traced. Prometheus reads the worker's Stats and Backlog
	// instead: pgdcbprom.Metrics.WatchEffects.
	Tracer Tracer
}

// validate refuses negative numbers and durations with a
// *pgdcb.InvalidArgumentError naming the field. NewQueue and NewWorker call
// it first, then withDefaults.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	return cfgcheck.NonNegative(
		cfgcheck.Duration("Lease", c.Lease, defaultLease),
		cfgcheck.Int("MaxAttempts", c.MaxAttempts, defaultMaxAttempts),
		cfgcheck.Duration("RetryMin", c.RetryMin, defaultRetryMin),
		cfgcheck.Duration("RetryMax", c.RetryMax, defaultRetryMax),
		cfgcheck.Duration("PollInterval", c.PollInterval, defaultPollInterval),
		cfgcheck.Int("BatchSize", c.BatchSize, defaultBatchSize),
	)
}

// withDefaults returns a copy of c (nil: the zero Config) with every zero
// field that has a default set to it.
func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	o.Lease = cmp.Or(o.Lease, defaultLease)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, defaultMaxAttempts)
	o.RetryMin = cmp.Or(o.RetryMin, defaultRetryMin)
	o.RetryMax = max(cmp.Or(o.RetryMax, defaultRetryMax), o.RetryMin)
	o.PollInterval = cmp.Or(o.PollInterval, defaultPollInterval)
	o.BatchSize = cmp.Or(o.BatchSize, defaultBatchSize)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Identity == "" {
		o.Identity = defaultIdentity()
	}
	return o
}

func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

func invalid(name, reason string) error {
	return &pgdcb.InvalidArgumentError{Name: name, Reason: reason}
}
