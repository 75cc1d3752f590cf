package projection_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/stopcheck"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// Run(ctx) is the runner's lifecycle: cancelled while its handler runs, it
// returns only after the handler has returned and every goroutine it
// started (the LISTEN connection's) has ended, and no handler runs after
// it. Then Store.Close returns and leaves no store goroutine behind.
func TestRunStopsCleanly(t *testing.T) {
	s, _ := newStore(t)
	appendN(t, s, "P", 5, 5)
	entered := make(chan struct{})
	var busy, after atomic.Int64
	var returned atomic.Bool
	r, err := projection.New(s, "stop", query.Tagged([]string{"P"}), func(ctx context.Context, _ pgx.Tx, _ []pgdcb.StoredEvent) error {
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
		<-ctx.Done() // runs until Run's context ends
		return ctx.Err()
	}, fast)
	require.NoError(t, err)
	run := stopcheck.Stop(t, r.Run, entered, busy.Load, wait,
		"github.com/pgdcb/pgdcb/projection", "github.com/pgdcb/pgdcb/internal/wake",
		"github.com/pgdcb/pgdcb/logical", "github.com/pgdcb/pgdcb/subscription")
	returned.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	require.Empty(t, run.Gone(stopcheck.Grace, "github.com/pgdcb/pgdcb/eventstore"), "store goroutines after Close")
	require.Zero(t, after.Load(), "a handler ran after Run returned")
}
