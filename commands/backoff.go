package commands

import (
	"time"

	"github.com/pgdcb/pgdcb/internal/retry"
)

// backoff returns the wait after the given failed attempt (1-based): base·2^(n-1)
// capped at max, jittered uniformly in [d/2, d].
func backoff(base, max time.Duration, attempt int) time.Duration {
	return retry.Jitter(retry.Delay(attempt, base, max))
}
