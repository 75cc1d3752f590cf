package commands

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/pgdcb/pgdcb/internal/cfgcheck"
)

// Defaults of Config.
const (
	defaultMaxAttempts = 10
	defaultRetryMin    = 2 * time.Millisecond
	defaultRetryMax    = 100 * time.Millisecond
)

// Config configures an Executor. nil or the zero value means every default:
// in every numeric and duration field 0 means the default; New refuses
// negative values with a *pgdcb.InvalidArgumentError.
type Config struct {
	// MaxAttempts is how many decisions one Execute makes before giving up on
	// conflicts (pgdcb.ErrConditionFailed). 0: the default, 10. 1 disables
	// retries.
	MaxAttempts int
	// RetryMin and RetryMax bound the capped exponential backoff between
	// attempts: RetryMin before the second, doubling with each further
	// attempt up to RetryMax, each wait jittered uniformly in [d/2, d]. 0:
	// the defaults, 2ms and 100ms (a RetryMax below RetryMin is raised to
	// it).
	RetryMin, RetryMax time.Duration
	// Logger receives the executor's logs: unknown outcomes at Warn with the
	// error under "err", conflicts decided again at Debug. Default: none.
	Logger *slog.Logger
	// Tracer observes each Execute (pgdcbprom.New for
	// Prometheus, pgdcbotel.New for spans). Default nil: nothing is traced.
	Tracer Tracer
}

// validate refuses negative numbers and durations with a
// *pgdcb.InvalidArgumentError naming the field. New calls it first, then
// withDefaults.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	return cfgcheck.NonNegative(
		cfgcheck.Int("MaxAttempts", c.MaxAttempts, defaultMaxAttempts),
		cfgcheck.Duration("RetryMin", c.RetryMin, defaultRetryMin),
		cfgcheck.Duration("RetryMax", c.RetryMax, defaultRetryMax),
	)
}

// withDefaults returns a copy of c (nil: the zero Config) with every zero
// field set to its default.
func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	o.MaxAttempts = cmp.Or(o.MaxAttempts, defaultMaxAttempts)
	o.RetryMin = cmp.Or(o.RetryMin, defaultRetryMin)
	o.RetryMax = max(cmp.Or(o.RetryMax, defaultRetryMax), o.RetryMin)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
