// Package retry holds the waiting rules every retrying loop of pgdcb shares:
// capped exponential delays, jitter, and a sleep that ends with its context.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Delay returns base·2^(attempt-1), at most max; attempt is 1-based (smaller
// counts as 1).
func Delay(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Jitter returns a uniformly random duration in [d/2, d], so that retries of
// many clients spread out.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Sleep waits for d, or returns ctx.Err() as soon as ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
