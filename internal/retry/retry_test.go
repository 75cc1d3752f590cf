package retry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDelayDoublesUpToMax(t *testing.T) {
	t.Parallel()
	base, max := 2*time.Millisecond, 50*time.Millisecond
	require.Equal(t, base, Delay(0, base, max))
	require.Equal(t, base, Delay(1, base, max))
	require.Equal(t, 4*time.Millisecond, Delay(2, base, max))
	require.Equal(t, 32*time.Millisecond, Delay(5, base, max))
	require.Equal(t, max, Delay(6, base, max))
	require.Equal(t, max, Delay(1000, base, max))
}

func TestJitterStaysInHalfToFull(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 500 {
		d := Jitter(40 * time.Millisecond)
		require.GreaterOrEqual(t, d, 20*time.Millisecond)
		require.LessOrEqual(t, d, 40*time.Millisecond)
		seen[d] = true
	}
	require.Greater(t, len(seen), 10, "jittered")
	require.Zero(t, Jitter(0))
}

func TestSleepEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
	require.NoError(t, Sleep(context.Background(), time.Millisecond))
}
