package eventstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
)

// A transaction holding an xid in another database of the cluster does not
// hold a tailing reader: the event appended after it is delivered while it is
// provably still open (its own connection still sees the same xid). Before
// the horizon left other databases out (pg_snapshot_xmin was cluster-wide),
// the reader delivered nothing until the deadline.
//
// The store lives in a throwaway database of its own, so that the tests of
// other packages, which share the server's default database, cannot hold its
// horizon; the open transaction runs in a second throwaway database (held in
// the default one, it would hold the other packages' readers).
func TestTailIsNotHeldByAnotherDatabase(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.PoolOnOtherDatabase(t)
	s := teststore.OnPool(t, pool, nil)
	held := pgtest.HoldXID(t, pgtest.OtherDatabase(t))
	res, err := s.Append(ctx, []pgdcb.Event{{Type: "Happened", Data: []byte(`{}`)}})
	require.NoError(t, err)
	require.Greater(t, res.TransactionID, held.XID, "the held transaction is older than the event")

	var got pgdcb.TailBatch
	await.Until(t, time.Minute, func() (bool, string) {
		b, err := s.ReadTail(ctx, query.All(), cursor.Start, 0)
		require.NoError(t, err)
		got = b
		return len(b.Events) == 1, fmt.Sprintf("the event not delivered: horizon %d held by %+v (the other database's xid is %d)",
			b.Horizon, b.HorizonHolder, held.XID)
	})
	running, err := held.Running(ctx)
	require.NoError(t, err)
	require.True(t, running, "the other database's transaction was still open when the event was delivered")
	require.Equal(t, res.Positions[0], got.Events[0].Position)
	require.Greater(t, got.Horizon, held.XID, "the horizon passed the other database's open transaction")
	require.Equal(t, res.Positions[0], got.Cursor.Position)
}

// The negative control: a transaction of the store's own database that holds
// an xid holds the horizon (an event it writes would sort behind a cursor
// moved past it), and the batch names it as the holder. Once it ends, the
// event is delivered.
func TestTailIsHeldBySameDatabaseTransaction(t *testing.T) {
	ctx := context.Background()
	pool, dsn := pgtest.PoolOnOtherDatabase(t)
	s := teststore.OnPool(t, pool, nil)
	var db string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	held := pgtest.HoldXID(t, dsn)
	require.Equal(t, db, held.Database)
	// An empty log: the horizon is still at or below the open transaction
	// (before, the empty head made it the snapshot's xmax).
	b, err := s.ReadTail(ctx, query.All(), cursor.Start, 0)
	require.NoError(t, err)
	require.LessOrEqual(t, b.Horizon, held.XID, "empty log")
	res, err := s.Append(ctx, []pgdcb.Event{{Type: "Happened", Data: []byte(`{}`)}})
	require.NoError(t, err)

	// While it runs the event is never delivered, and the holder is named.
	await.Until(t, time.Minute, func() (bool, string) {
		b, err := s.ReadTail(ctx, query.All(), cursor.Start, 0)
		require.NoError(t, err)
		require.Empty(t, b.Events, "delivered while a transaction of this database older than the event is open")
		require.LessOrEqual(t, b.Horizon, held.XID)
		require.True(t, cursor.Start == b.Cursor || b.Cursor.TransactionID < held.XID, "the cursor passed the open transaction: %v", b.Cursor)
		if b.HorizonHolder.PID == held.PID {
			require.Equal(t, held.XID, b.Horizon)
			require.Equal(t, held.Database, b.HorizonHolder.Database)
			return true, ""
		}
		return false, fmt.Sprintf("holder %+v at horizon %d, want pid %d", b.HorizonHolder, b.Horizon, held.PID)
	})
	running, err := held.Running(ctx)
	require.NoError(t, err)
	require.True(t, running)

	held.Release()
	await.Until(t, time.Minute, func() (bool, string) {
		b, err := s.ReadTail(ctx, query.All(), cursor.Start, 0)
		require.NoError(t, err)
		if len(b.Events) == 1 {
			require.Equal(t, res.Positions[0], b.Events[0].Position)
			return true, ""
		}
		return false, fmt.Sprintf("not delivered after the transaction ended (horizon %d)", b.Horizon)
	})
}
