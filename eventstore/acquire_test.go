package eventstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/connpeek"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
)

// unpingedPool is a pool of maxConns connections to the test server that
// never pings a connection on acquire (as pgxpool does not ping one idle
// for less than a second: the connections of a busy pool).
func unpingedPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pcfg := pgtest.Pool(t).Config()
	pcfg.MaxConns = maxConns
	pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// killIdle opens all of pool's connections, then ends their backends (as a
// server restart does) and waits until they are gone; it returns their
// connections' count.
func killIdle(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	ctx := t.Context()
	var pids []int32
	var held []*pgxpool.Conn
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, c)
		pids = append(pids, int32(c.Conn().PgConn().PID()))
	}
	for _, c := range held {
		c.Release()
	}
	var gone int
	require.NoError(t, pgtest.Pool(t).QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
		FROM unnest($1::int[]) AS pid`, pids).Scan(&gone))
	require.Equal(t, len(pids), gone, "every backend ended")
	return len(pids)
}

// After the server ended the pool's idle connections (pg_terminate_backend
// here; a restart does it to all of them), an append is not the one that
// finds out: the store checks each connection it acquires where that is
// cheap (one peek at its socket, pinging it only when bytes wait or the
// socket is closed), closes the dead ones and takes fresh ones. Nothing is
// settled and nothing is sent on a dead connection. Without the check the
// first append met a dead connection and was settled (absent, sent again).
func TestDeadPooledConnectionsAreNotSentOn(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(map[bool]string{false: "GroupCommitDisabled", true: "grouped"}[grouped], func(t *testing.T) {
			pool := unpingedPool(t, 4)
			base := teststore.OnPool(t, pool, nil)
			s, err := eventstore.New(pool, &eventstore.Config{Schema: base.Schema(), GroupCommitDisabled: !grouped, NotifyDisabled: true})
			require.NoError(t, err)
			killed := killIdle(t, pool)
			ctx := context.Background()
			for i := range killed + 1 {
				tag := "dead=" + strconv.Itoa(i)
				res, err := s.Append(ctx, evs(pgdcb.MustEvent("AfterKill", i, tag)))
				require.NoError(t, err, "append %d", i)
				require.Equal(t, positionsOf(t, s, tag), res.Positions, "append %d stored once", i)
			}
			st := s.SettleStats()
			require.Zero(t, st.Settled, "no append met a dead connection: %+v", st)
			require.EqualValues(t, killed, st.DeadConns, "every killed connection found dead and closed: %+v", st)
		})
	}
}

// A send that fails before anything left the client (pgx reports a
// connection closed before use as safe to retry) is sent once more on a
// fresh connection without settling, and the caller gets its result.
// Without that it was settled (a termination check and a lookup, then sent
// again).
func TestNotSentIsSentAgainWithoutSettling(t *testing.T) {
	closed := 0
	s := hookedStore(t, func(conn *pgxpool.Conn) {
		if closed == 0 { // the first append's connection, after the store checked it
			closed++
			require.NoError(t, conn.Conn().Close(context.Background()))
		}
	})
	st := appendStoredOnce(t, s, "notsent=1")
	require.Equal(t, 1, closed)
	require.EqualValues(t, 1, st.NotSent, "%+v", st)
	require.Zero(t, st.Settled+st.Resent, "%+v", st)
}

// A resend after settling takes the same retry: the call's first send met
// a terminated backend (settled: absent), its resend met a connection closed
// before use (not sent), and it is sent once more on a fresh connection, so
// the caller gets its result and the log holds it once. Before the one
// retry for every path the resend answered a *NotAppliedError then.
func TestResendThatWasNotSentIsSentAgain(t *testing.T) {
	sends := 0
	s := hookedStore(t, func(conn *pgxpool.Conn) {
		sends++
		switch sends {
		case 1: // the first send: its backend ends before the request reaches it
			var gone bool
			require.NoError(t, pgtest.Pool(t).QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`,
				int32(conn.Conn().PgConn().PID())).Scan(&gone))
			require.True(t, gone, "the backend ended")
		case 2: // the resend, after settling: its connection is closed before use
			require.NoError(t, conn.Conn().Close(context.Background()))
		}
	})
	st := appendStoredOnce(t, s, "resend=1")
	require.Equal(t, 3, sends)
	require.EqualValues(t, 1, st.Settled, "%+v", st)
	require.EqualValues(t, 1, st.Absent, "%+v", st)
	require.EqualValues(t, 1, st.Resent, "%+v", st)
	require.EqualValues(t, 1, st.NotSent, "%+v", st)
}

// hookedStore is a store without grouping (and without NOTIFY) on an
// unpinged pool of 2 connections whose appends run hook on their connection
// just before each send.
func hookedStore(t *testing.T, hook func(conn *pgxpool.Conn)) *eventstore.Store {
	t.Helper()
	pool := unpingedPool(t, 2)
	base := teststore.OnPool(t, pool, nil)
	s, err := eventstore.New(pool, &eventstore.Config{Schema: base.Schema(), GroupCommitDisabled: true, NotifyDisabled: true})
	require.NoError(t, err)
	eventstore.SetSendHook(s, hook)
	return s
}

// appendStoredOnce appends one event tagged tag, requires the append to
// succeed with the positions the log holds for it (stored once), and
// returns the settling counters.
func appendStoredOnce(t *testing.T, s *eventstore.Store, tag string) eventstore.SettleStats {
	t.Helper()
	res, err := s.Append(context.Background(), evs(pgdcb.MustEvent("Once", 1, tag)))
	require.NoError(t, err)
	require.Equal(t, positionsOf(t, s, tag), res.Positions, "stored once")
	return s.SettleStats()
}

// connpeek tells a quiet connection from one whose backend has ended.
func TestConnPeek(t *testing.T) {
	pool := unpingedPool(t, 1)
	ctx := t.Context()
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	require.Equal(t, connpeek.Quiet, connpeek.Peek(c.Conn().PgConn().Conn()))
	var ok bool
	require.NoError(t, pgtest.Pool(t).QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, int32(c.Conn().PgConn().PID())).Scan(&ok))
	require.True(t, ok)
	await.True(t, 30*time.Second, "the ended backend's socket shows it", func() bool {
		return connpeek.Peek(c.Conn().PgConn().Conn()) == connpeek.Pending
	})
}
