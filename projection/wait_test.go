package projection_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// WaitFor returns once the batch holding the append is committed with the
// read model, not before: while the handler is held inside that batch, a
// waiter whose ctx ends gets ctx's error; released, the waiter returns and the
// read model has the event.
func TestWaitForReturnsOnceTheAppendIsCommitted(t *testing.T) {
	ctx := t.Context()
	s, pool := newStore(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	r, err := projection.New(s, "wait", query.Tagged([]string{"Ordered"}),
		func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return insertRows(ident.Schema(s))(ctx, tx, evs)
		}, nil)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() { stop(); <-done }()

	res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Ordered", nil)})
	require.NoError(t, err)
	<-entered
	early, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, r.WaitFor(early, res.Cursor()), context.Canceled, "the batch is not committed yet")

	waited := make(chan error, 1)
	go func() { waited <- r.WaitFor(ctx, res.Cursor()) }()
	close(release)
	require.NoError(t, <-waited)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+ident.Schema(s)+`.rm`).Scan(&n))
	require.Equal(t, 1, n, "the read model has the append when WaitFor returns")
	require.NoError(t, r.WaitFor(ctx, res.Cursor()), "already there: at once")
}

// A paused projection will not reach the target: WaitFor says so.
func TestWaitForAPausedProjection(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t)
	r, err := projection.New(s, "paused", query.Tagged([]string{"Ordered"}), insertRows(ident.Schema(s)), nil)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() { stop(); <-done }()
	first, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Ordered", nil)})
	require.NoError(t, err)
	require.NoError(t, r.WaitFor(ctx, first.Cursor()))
	require.NoError(t, r.Pause(ctx))
	res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Ordered", nil)})
	require.NoError(t, err)
	err = r.WaitFor(ctx, res.Cursor())
	require.True(t, errors.Is(err, projection.ErrNotActive), "got %v", err)
}
