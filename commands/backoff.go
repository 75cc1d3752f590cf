package commands

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff returns the wait after the given failed attempt (1-based): base·2^(n-1)
// capped at max, jittered uniformly in [d/2, d].
func backoff(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
