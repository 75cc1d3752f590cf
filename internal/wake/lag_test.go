package wake_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/wake"
)

func TestHorizonWait(t *testing.T) {
	t.Parallel()
	var h wake.HorizonWait
	poll := 100 * time.Millisecond
	free := pgdcb.TailBatch{Horizon: 50, Head: cursor.Cursor{TransactionID: 40}}
	require.Equal(t, poll, h.Next(free, poll))
	held := pgdcb.TailBatch{Horizon: 50, Head: cursor.Cursor{TransactionID: 60}}
	var got []time.Duration
	for range 8 {
		got = append(got, h.Next(held, poll))
	}
	require.Equal(t, []time.Duration{2, 4, 8, 16, 32, 64, 100, 100}, scale(got))
	moved := held
	moved.Horizon = 55
	require.Equal(t, 2*time.Millisecond, h.Next(moved, poll), "a new horizon starts over")
	require.Equal(t, poll, h.Next(free, poll))
}

func scale(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / time.Millisecond
	}
	return out
}

func TestLagTracker(t *testing.T) {
	t.Parallel()
	var lt wake.LagTracker
	now := time.Now()
	ev := pgdcb.StoredEvent{Position: 10, TransactionID: 5, OccurredAt: now.Add(-3 * time.Second)}
	l := lt.Observe(pgdcb.TailBatch{Events: []pgdcb.StoredEvent{ev}, Cursor: cursor.Cursor{TransactionID: 5, Position: 10},
		Horizon: 6, Head: cursor.Cursor{TransactionID: 9, Position: 30}}, now)
	require.Equal(t, int64(20), l.Events)
	require.Equal(t, 3*time.Second, l.Behind)
	require.Zero(t, l.HorizonHeld)
	holder := pgdcb.HorizonHolder{PID: 4242, Database: "app"}
	l = lt.Observe(pgdcb.TailBatch{Cursor: cursor.Cursor{TransactionID: 5, Position: 10},
		Horizon: 6, HorizonHolder: holder, Head: cursor.Cursor{TransactionID: 9, Position: 30}}, now.Add(2*time.Second))
	require.Equal(t, 2*time.Second, l.HorizonHeld)
	require.Equal(t, holder, l.HorizonHolder, "the holder is reported while the horizon is held")
	l = lt.Observe(pgdcb.TailBatch{Cursor: cursor.Cursor{TransactionID: 9, Position: 1 << 62},
		Horizon: 10, Head: cursor.Cursor{TransactionID: 9, Position: 30}}, now.Add(3*time.Second))
	require.Equal(t, wake.Lag{}, l)
}
