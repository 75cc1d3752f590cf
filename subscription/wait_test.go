package subscription_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// WaitFor returns once the handler has returned from the batch holding the
// append, not before: while the handler is held inside it, a waiter whose
// ctx ends gets ctx's error.
func TestWaitForReturnsOnceTheHandlerHandledTheAppend(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, "")
	sub, err := subscription.New(s, query.Tagged([]string{"Ordered"}), nil)
	require.NoError(t, err)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	handled := 0
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(runCtx, cursor.Start, func(ctx context.Context, b subscription.Batch) error {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			handled += len(b.Events)
			return nil
		})
	}()
	defer func() { stop(); <-done }()

	res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Ordered", nil)})
	require.NoError(t, err)
	<-entered
	early, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, sub.WaitFor(early, res.Cursor()), context.Canceled, "the handler has not returned yet")
	c, ok := sub.Processed()
	require.True(t, ok)
	require.Negative(t, cursor.Compare(c.TransactionID, c.Position, res.TransactionID, res.Positions[0]))

	waited := make(chan error, 1)
	go func() { waited <- sub.WaitFor(ctx, res.Cursor()) }()
	close(release)
	require.NoError(t, <-waited)
	require.Equal(t, 1, handled, "the handler returned from the append's batch before WaitFor did")
}

// When Run returns (here: its handler failed) before the target, WaitFor
// says the subscription is not running, with Run's error.
func TestWaitForAfterRunReturned(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, "")
	sub, err := subscription.New(s, query.Tagged([]string{"Ordered"}), nil)
	require.NoError(t, err)
	boom := errors.New("boom")
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, cursor.Start, func(context.Context, subscription.Batch) error { return boom })
	}()
	res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Ordered", nil)})
	require.NoError(t, err)
	err = sub.WaitFor(ctx, res.Cursor())
	require.ErrorIs(t, err, subscription.ErrNotRunning)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, <-done, boom)
}
