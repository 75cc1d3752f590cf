package eventstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// An append sent alone (nothing else queued) is append_events' call with
// its keys tried first (eventstore/alone.go). When one of them is held by
// another transaction, nothing of the call runs: it returns the busy key at
// once, where a call that ran append_events would wait for the key until
// the holder ends (here: until the deadline), and writes nothing. With its
// keys free it appends, and its check answers as append_events does.
func TestAloneBusyKeyRunsNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, nil)
	holder := holdBoundary(t, s, "k=held")

	conn, err := s.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, busy, err := eventstore.TryAppendAlone(cctx, s, conn, []pgdcb.Event{pgdcb.MustEvent("Alone", 1, "k=held")}, nil)
	require.NoError(t, err, "the call waited for the held key")
	require.Len(t, busy, 1)
	require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus(), "the call left a transaction open")

	res, busy, err := eventstore.TryAppendAlone(cctx, s, conn, []pgdcb.Event{pgdcb.MustEvent("Alone", 2, "k=free")}, nil)
	require.NoError(t, err)
	require.Empty(t, busy)
	require.Len(t, res.Positions, 1)
	require.NotZero(t, res.TransactionID)

	_, _, err = eventstore.TryAppendAlone(cctx, s, conn, []pgdcb.Event{pgdcb.MustEvent("Alone", 3, "k=free")},
		&appendif.Condition{FailIfEventsMatch: query.Tagged(nil, "k=free")})
	var cf *appendif.ConditionFailedError
	require.ErrorAs(t, err, &cf)
	require.Equal(t, res.Positions[0], cf.ConflictPosition)
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)

	require.NoError(t, holder.Rollback(ctx))
	require.Zero(t, countTagged(t, s, "k=held"))
	require.Equal(t, 1, countTagged(t, s, "k=free"))
}
