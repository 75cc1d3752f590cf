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
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{eventstore.NotifyChannel(s.Schema())}.Sanitize())
	require.NoError(t, err)

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
