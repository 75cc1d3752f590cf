package wake_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/wake"
	"github.com/pgdcb/pgdcb/memstore"
)

// With notifications on and a poll interval of an hour, Wait returns only
// through the store's Listen: once when it starts listening, then after an
// append.
func TestWakerWakesOnAppend(t *testing.T) {
	t.Parallel()
	s := memstore.MustNew(nil)
	w := wake.New(s, time.Hour, true, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.Start(ctx)
	defer w.Stop()
	require.NoError(t, w.Wait(ctx), "the wake-up when listening starts")
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("E", 1, "k=v")})
	require.NoError(t, err)
	require.NoError(t, w.Wait(ctx), "the wake-up after the append")
}

// With notifications off, Wait returns every poll interval, and at once
// after Wake.
func TestWakerPollsWithoutNotify(t *testing.T) {
	t.Parallel()
	s := memstore.MustNew(nil)
	w := wake.New(s, 10*time.Millisecond, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.Start(ctx) // does nothing: polling only
	defer w.Stop()
	require.NoError(t, w.Wait(ctx), "the poll interval passed")
	w.Wake()
	require.NoError(t, w.WaitFor(ctx, time.Hour), "Wake ends the next wait")
	stopped, stop := context.WithCancel(ctx)
	stop()
	require.ErrorIs(t, w.WaitFor(stopped, time.Hour), context.Canceled)
}
