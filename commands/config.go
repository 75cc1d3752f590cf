package commands

import (
	"log/slog"
	"time"
)

// Defaults of Config.
const (
	DefaultMaxAttempts = 10
	DefaultBackoffBase = 2 * time.Millisecond
	DefaultBackoffMax  = 100 * time.Millisecond
)

// Config configures an Executor. nil or the zero value means every default.
type Config struct {
	// MaxAttempts is how many decisions one Execute makes before giving up on
	// conflicts (pgdcb.ErrConditionFailed). Default 10. 1 disables retries.
	MaxAttempts int
	// BackoffBase is the wait before the second attempt; it doubles with each
	// further attempt up to BackoffMax. Each wait is jittered uniformly in
	// [d/2, d]. Default 2ms.
	BackoffBase time.Duration
	// BackoffMax caps the wait between attempts. Default 100ms.
	BackoffMax time.Duration
	// MetricsNamespace prefixes the Prometheus metric names. Default "pgdcb".
	MetricsNamespace string
	// Logger receives debug logs (conflicts, retries). Default: none.
	Logger *slog.Logger
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
	if out.MetricsNamespace == "" {
		out.MetricsNamespace = "pgdcb"
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}
