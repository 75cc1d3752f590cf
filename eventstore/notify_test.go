package eventstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgtest"
)

func TestAppendNotifiesAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, eventstore.ListenConn(ctx, conn, s.Schema()))

	_, err = s.Append(ctx, []eventstore.Event{eventstore.MustEvent("X", 1, "k=v")})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	require.NoError(t, err, "a notification must arrive after an append commits")
	require.Equal(t, eventstore.NotifyChannel(s.Schema()), n.Channel)

	// Disabled: nothing is sent.
	quiet, err := eventstore.New(s.Pool(), &eventstore.Config{Schema: s.Schema(), NotifyDisabled: true})
	require.NoError(t, err)
	_, err = quiet.Append(ctx, []eventstore.Event{eventstore.MustEvent("X", 1, "k=v")})
	require.NoError(t, err)
	wctx2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	_, err = conn.WaitForNotification(wctx2)
	require.Error(t, err, "no notification with NotifyDisabled")
}

// TestNoNotifyWithoutListener: an append that no registered listener waits
// for sends no NOTIFY (and so commits one transaction, not two): a bare
// LISTEN without the registration lock hears nothing once the store's
// sender is done, and hears the next append as soon as another session
// registers (ListenConn), and nothing again after that one unregisters.
func TestNoNotifyWithoutListener(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s0, _ := newStore(t, nil)
	channel := eventstore.NotifyChannel(s0.Schema())
	bare, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer bare.Close(ctx)
	_, err = bare.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)

	// appendAndDrain appends through a store of its own and closes it, so
	// that its notification sender has finished when it returns.
	appendAndDrain := func() {
		st, err := eventstore.New(s0.Pool(), &eventstore.Config{Schema: s0.Schema()})
		require.NoError(t, err)
		_, err = st.Append(ctx, []eventstore.Event{eventstore.MustEvent("X", 1, "k=v")})
		require.NoError(t, err)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, st.Close(cctx))
	}
	heard := func(wait time.Duration) bool {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		n, err := bare.WaitForNotification(wctx)
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
			return false
		}
		require.Equal(t, channel, n.Channel)
		return true
	}

	appendAndDrain()
	require.False(t, heard(300*time.Millisecond), "no listener is registered: no NOTIFY")

	reg, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer reg.Close(ctx)
	require.NoError(t, eventstore.ListenConn(ctx, reg, s0.Schema()))
	appendAndDrain()
	require.True(t, heard(10*time.Second), "a listener is registered: the append notifies")

	require.NoError(t, eventstore.UnlistenConn(ctx, reg, s0.Schema()))
	appendAndDrain()
	require.False(t, heard(300*time.Millisecond), "the listener unregistered: no NOTIFY")
}
