package eventstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
)

func TestAppendNotifiesAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, eventstore.ListenConn(ctx, conn, s.Schema()))

	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1, "k=v")})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	require.NoError(t, err, "a notification must arrive after an append commits")
	require.Equal(t, eventstore.NotifyChannel(s.Schema()), n.Channel)

	// Disabled: nothing is sent.
	quiet, err := eventstore.New(s.Pool(), &eventstore.Config{Schema: s.Schema(), NotifyDisabled: true})
	require.NoError(t, err)
	_, err = quiet.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1, "k=v")})
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
		_, err = st.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1, "k=v")})
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

// TestListenWakesAgainAfterSettle: Store.Listen calls wake as soon as it
// listens and once more ListenerSettle later (for appends whose store still
// trusted a "no listener" answer), then only on notifications.
func TestListenWakesAgainAfterSettle(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := make(chan time.Time, 16)
	done := make(chan error, 1)
	go func() { done <- s.Listen(ctx, func() { wakes <- time.Now() }) }()
	var first time.Time
	select {
	case first = <-wakes:
	case err := <-done:
		t.Fatalf("Listen returned: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no wake once listening")
	}
	select {
	case second := <-wakes:
		require.GreaterOrEqual(t, second.Sub(first), eventstore.ListenerCheckInterval, "the second wake comes after the settle time")
	case <-time.After(30 * time.Second):
		t.Fatal("no second wake ListenerSettle after listening")
	}
	select {
	case <-wakes:
		t.Fatal("a third wake without any append")
	case <-time.After(3 * eventstore.ListenerSettle):
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestNotifyCheckIsCached: a store that found no listener sends no
// statement for ListenerCheckInterval; then it checks again, and appends
// wake a listener registered since (through Listen: every append that
// commits after the listener started wakes it, by NOTIFY or by the second
// wake).
func TestNotifyCheckIsCached(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := newStore(t, nil)
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1, "k=v")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return eventstore.NoListenerCached(s) }, 30*time.Second, 5*time.Millisecond,
		"the first append's check found no listener")

	// Each wake reports how many X events a read at that moment shows:
	// a wake that came before an append committed does not cover it.
	wakes := make(chan int, 64)
	go func() {
		_ = s.Listen(ctx, func() {
			evs, _, err := s.ReadAll(ctx, query.Tagged([]string{"X"}, "k=v"), nil)
			if err != nil {
				evs = nil
			}
			wakes <- len(evs)
		})
	}()
	select {
	case <-wakes:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake once listening")
	}
	// Appended at once, most likely while the store still trusts its last
	// check: the second wake (or, if the window passed, the NOTIFY) must
	// come.
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 2, "k=v")})
	require.NoError(t, err)
	for seen := 0; seen < 2; {
		select {
		case seen = <-wakes:
		case <-time.After(30 * time.Second):
			t.Fatal("no wake after an append that committed after the listener started")
		}
	}
	// Past the window, appends notify again.
	require.Eventually(t, func() bool {
		_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 3, "k=v")})
		require.NoError(t, err)
		select {
		case <-wakes:
			return !eventstore.NoListenerCached(s)
		case <-time.After(time.Second):
			return false
		}
	}, 30*time.Second, 10*time.Millisecond, "appends notify the registered listener once the store checks again")
}
