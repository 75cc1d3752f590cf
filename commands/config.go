package commands

import (
	"log/slog"
	"time"

	"github.com/pgdcb/pgdcb/internal/cfgcheck"
)

// Defaults of Config.
const (
	DefaultMaxAttempts = 10
	DefaultBackoffBase = 2 * time.Millisecond
	DefaultBackoffMax  = 100 * time.Millisecond
)

// Config configures an Executor. nil or the zero value means every default:
// in every numeric and duration field 0 means the default; New refuses
// negative values with a *pgdcb.InvalidArgumentError.
type Config struct {
	// MaxAttempts is how many decisions one Execute makes before giving up on
	// conflicts (pgdcb.ErrConditionFailed). 0: the default, 10. 1 disables
	// retries.
	MaxAttempts int
	// BackoffBase is the wait before the second attempt; it doubles with each
	// further attempt up to BackoffMax. Each wait is jittered uniformly in
	// [d/2, d]. 0: the default, 2ms.
	BackoffBase time.Duration
	// BackoffMax caps the wait between attempts (a BackoffMax below
	// BackoffBase is raised to it). 0: the default, 100ms.
	BackoffMax time.Duration
	// Logger receives the executor's logs: unknown outcomes at Warn with the
	// error under "err", conflicts decided again at Debug. Default: none.
	Logger *slog.Logger
}

// validate refuses negative numbers and durations with a
// *pgdcb.InvalidArgumentError naming the field. New calls it first.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	return cfgcheck.NonNegative(
		cfgcheck.Int("MaxAttempts", c.MaxAttempts, DefaultMaxAttempts),
		cfgcheck.Duration("BackoffBase", c.BackoffBase, DefaultBackoffBase),
		cfgcheck.Duration("BackoffMax", c.BackoffMax, DefaultBackoffMax),
	)
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.MaxAttempts <= 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.BackoffBase <= 0 {
		out.BackoffBase = DefaultBackoffBase
	}
	if out.BackoffMax <= 0 {
		out.BackoffMax = DefaultBackoffMax
	}
	if out.BackoffMax < out.BackoffBase {
		out.BackoffMax = out.BackoffBase
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}
