package effects

import (
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
	DefaultLease        = 30 * time.Second
	DefaultMaxAttempts  = 5
	DefaultRetryBackoff = time.Second
	DefaultMaxBackoff   = time.Minute
	DefaultPollInterval = time.Second
	DefaultBatchSize    = 1000
)

// Config configures a Queue and a Worker (a Queue reads only Logger). nil or
// the zero value means every default: in every numeric and duration field 0
// means the default; negative values are refused with a
// *pgdcb.InvalidArgumentError.
type Config struct {
	// Handlers maps an effect type to the handler that executes it. A
	// Worker claims only effects whose type it has a handler for; NewWorker
	// refuses an empty map.
	Handlers map[string]Handler
	// WorkerID names the worker in effect_started events. Two workers must
	// never share an ID. Default "": the host name, the process id and 6
	// random hex digits.
	WorkerID string
	// Lease is how long a claim holds an effect without news from its
	// worker: while the handler runs, the worker extends it a third of the
	// way through (effect_lease_extended); once it has passed, another worker
	// may claim the effect again (the next attempt). A worker that cannot
	// extend its lease ends the handler's context. 0: the default, 30s.
	Lease time.Duration
	// MaxAttempts is how many attempts an effect gets (a claim whose lease
	// expired counts as one); the failure of the last one fails the effect
	// for good. 0: the default, 5.
	MaxAttempts int
	// RetryBackoff is the wait after the first failed attempt; it doubles
	// after each further failure, up to MaxBackoff. 0: the default, 1s.
	RetryBackoff time.Duration
	// MaxBackoff caps the wait between attempts (raised to RetryBackoff if
	// below it). 0: the default, 1m.
	MaxBackoff time.Duration
	// PollInterval is the longest a worker waits before looking for work
	// again when no notification wakes it. 0: the default, 1s.
	PollInterval time.Duration
	// BatchSize is the page size of the worker's reads of new effect events. 0: the
	// default, 1000.
	BatchSize int
	// Logger receives failures at Warn (store errors, lost leases) with the
	// error under "err". Default: none.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	return cfgcheck.NonNegative(
		cfgcheck.Duration("Lease", c.Lease, DefaultLease),
		cfgcheck.Int("MaxAttempts", c.MaxAttempts, DefaultMaxAttempts),
		cfgcheck.Duration("RetryBackoff", c.RetryBackoff, DefaultRetryBackoff),
		cfgcheck.Duration("MaxBackoff", c.MaxBackoff, DefaultMaxBackoff),
		cfgcheck.Duration("PollInterval", c.PollInterval, DefaultPollInterval),
		cfgcheck.Int("BatchSize", c.BatchSize, DefaultBatchSize),
	)
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Lease == 0 {
		out.Lease = DefaultLease
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.RetryBackoff == 0 {
		out.RetryBackoff = DefaultRetryBackoff
	}
	if out.MaxBackoff == 0 {
		out.MaxBackoff = DefaultMaxBackoff
	}
	if out.MaxBackoff < out.RetryBackoff {
		out.MaxBackoff = out.RetryBackoff
	}
	if out.PollInterval == 0 {
		out.PollInterval = DefaultPollInterval
	}
	if out.BatchSize == 0 {
		out.BatchSize = DefaultBatchSize
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.WorkerID == "" {
		out.WorkerID = defaultWorkerID()
	}
	return out
}

func defaultWorkerID() string {
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
