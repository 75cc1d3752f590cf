package effects_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/internal/testing/stopcheck"
)

// Run(ctx) is the worker's lifecycle: cancelled while a handler runs, it
// returns only after the handler has returned and every goroutine it
// started (the lease keeper's, the LISTEN connection's) has ended; no
// handler runs after it. Then Store.Close returns (waiting for the store's
// own goroutines, as the notification of the attempt's record) and leaves
// no store goroutine behind.
func TestRunStopsCleanly(t *testing.T) {
	s, _, _ := oneEffect(t, nil)
	entered := make(chan struct{})
	var busy, after atomic.Int64
	var returned atomic.Bool
	w, err := effects.NewWorker(s, &effects.Config{Lease: time.Second, PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"job": func(ctx context.Context, _ effects.Effect) error {
			if returned.Load() {
				after.Add(1)
			}
			busy.Add(1)
			defer busy.Add(-1)
			select {
			case <-entered:
			default:
				close(entered)
			}
			<-ctx.Done() // runs until Run's context ends (the lease is kept meanwhile)
			return ctx.Err()
		}}})
	require.NoError(t, err)
	run := stopcheck.Stop(t, w.Run, entered, busy.Load, 90*time.Second,
		"github.com/pgdcb/pgdcb/effects", "github.com/pgdcb/pgdcb/internal/wake", "github.com/pgdcb/pgdcb/subscription")
	returned.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	require.Empty(t, run.Gone(stopcheck.Grace, "github.com/pgdcb/pgdcb/eventstore"), "store goroutines after Close")
	require.Zero(t, after.Load(), "a handler ran after Run returned")
}
