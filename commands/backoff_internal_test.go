package commands

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffIsCappedAndJittered(t *testing.T) {
	base, max := 2*time.Millisecond, 50*time.Millisecond
	seen := map[time.Duration]bool{}
	for attempt := 1; attempt <= 40; attempt++ {
		for range 50 {
			d := backoff(base, max, attempt)
			want := base << min(attempt-1, 10)
			if want > max {
				want = max
			}
			require.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			require.LessOrEqual(t, d, want, "attempt %d", attempt)
			seen[d] = true
		}
	}
	require.Greater(t, len(seen), 10, "waits are jittered")
}
