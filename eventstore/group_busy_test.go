package eventstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
)

// Busy keys (docs/GROUPCOMMIT.md): an open transaction delays only the
// appends that share one of its keys, whatever grouping does.

// keyWaiters counts the backends of s's schema that wait for a lock in an
// append call (asked through another pool).
func keyWaiters(t *testing.T, s *eventstore.Store, other *pgxpool.Pool, fn string) int {
	t.Helper()
	var k int
	require.NoError(t, other.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '.' || $2 || '%'
		  AND pid <> pg_backend_pid()`, ident.Schema(s), fn).Scan(&k))
	return k
}

// The reproduction (#23): an application transaction holds one tag
// (AppendIfTx, kept open), 8 appends on that tag wait for it, and appends
// on unrelated boundaries, from 8 goroutines, must all complete while the
// transaction is still open; the appends on the held tag must not. A pool
// of 4 connections (pgxpool's default on this machine's 2 cores), shared by
// the holding transaction: waiters that each held a connection would leave
// none for the others. Before the fix no unrelated append completed until
// the transaction ended.
func TestGroupHeldTagDelaysOnlyItsAppends(t *testing.T) {
	ctx := context.Background()
	base, _ := newStore(t, nil)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool := mustPool(t, cfg)
	s, err := eventstore.New(pool, &eventstore.Config{Schema: base.Schema()})
	require.NoError(t, err)
	other := pgtest.Pool(t)

	tx := holdBoundary(t, s, "k=a0")
	const held = 8
	var heldDone atomic.Int64
	heldErrs := make(chan error, held)
	for i := range held {
		go func() {
			_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Held", i, "k=a0")})
			heldDone.Add(1)
			heldErrs <- err
		}()
	}
	awaitServer(t, "no append waited for the held tag", func() bool {
		return keyWaiters(t, s, other, "append_") > 0
	})

	const writers, each = 8, 5
	unrelated := make(chan error, writers*each)
	for w := range writers {
		go func() {
			for i := range each {
				tag := fmt.Sprintf("k=u%d-%d", w, i)
				ev := []pgdcb.Event{pgdcb.MustEvent("Free", i, tag)}
				var err error
				if i%2 == 0 {
					_, err = s.AppendIf(ctx, ev, appendif.FailIf(query.Tagged(nil, tag), nil))
				} else {
					_, err = s.Append(ctx, ev)
				}
				unrelated <- err
			}
		}()
	}
	deadline := time.After(60 * time.Second)
	for range writers * each {
		select {
		case err := <-unrelated:
			require.NoError(t, err)
		case <-deadline:
			t.Fatalf("unrelated appends stalled behind the held tag (group stats %+v)", s.GroupStats())
		}
	}
	// Every unrelated append completed with the transaction still open;
	// the appends on its tag wait, as they must.
	require.Equal(t, byte('T'), tx.Conn().PgConn().TxStatus(), "the holding transaction is open")
	require.Zero(t, heldDone.Load(), "an append on the held tag completed while it was held")

	require.NoError(t, tx.Commit(ctx))
	for range held {
		require.NoError(t, <-heldErrs)
	}
	require.Equal(t, held, countEvents(t, s, query.Tagged([]string{"Held"}, "k=a0")))
	require.Equal(t, writers*each, countEvents(t, s, query.Tagged([]string{"Free"})))
	// The held-tag appends went the busy path: tried, found busy, sent
	// behind the key. Not necessarily all 8: an append that found nothing
	// queued and was sent at once by its caller waits for the key in the
	// server, on its own connection (failed once under load with Busy 7).
	st := s.GroupStats()
	require.Positive(t, st.Busy, "%+v", st)
	t.Logf("%+v", st)
}

// One group whose first member needs a held key: that member leaves the
// group unsent, the others commit together at once, and it commits alone
// once the key is free.
func TestGroupBusyKeyLeavesTheGroup(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	plain, err := eventstore.New(pgtest.Pool(t), &eventstore.Config{Schema: s.Schema()})
	require.NoError(t, err)
	tx := holdBoundary(t, plain, "acct=held")
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer startBlocker(t, s)()
	before := s.GroupStats()
	const n = 4
	type out struct {
		res pgdcb.AppendResult
		err error
	}
	outs := make([]chan out, n)
	for i := range n {
		outs[i] = make(chan out, 1)
		tag := fmt.Sprintf("acct=free%d", i)
		if i == 0 {
			tag = "acct=held"
		}
		go func() {
			res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", i, tag)})
			outs[i] <- out{res, err}
		}()
		awaitGroup(t, s, "the call did not queue", func() bool { return eventstore.QueuedAppends(s) >= i+1 })
	}
	conn.Release()
	recv := func(i int) out {
		select {
		case o := <-outs[i]:
			return o
		case <-time.After(60 * time.Second):
			t.Fatalf("append %d stalled (group stats %+v)", i, s.GroupStats())
			return out{}
		}
	}
	var tx0 uint64
	for i := 1; i < n; i++ {
		o := recv(i)
		require.NoError(t, o.err)
		if i == 1 {
			tx0 = o.res.TransactionID
		}
		require.Equal(t, tx0, o.res.TransactionID, "one transaction for the free members")
	}
	st := s.GroupStats().Sub(before)
	require.Equal(t, int64(1), st.Groups, "%+v", st)
	require.Equal(t, int64(1), st.Busy, "%+v", st)
	select {
	case o := <-outs[0]:
		t.Fatalf("the append on the held tag returned while it was held: %+v", o)
	default:
	}
	require.NoError(t, tx.Rollback(ctx))
	o := recv(0)
	require.NoError(t, o.err)
	require.NotEqual(t, tx0, o.res.TransactionID)
}

// The second reproduction (#23): with lock_timeout set, a group
// used to wait for a held key until the timeout aborted it; its members
// were then retried alone on the same connection, the first (on the held
// key) waited again, its caller gave up, pgx closed the connection, and
// the members after it were "sent" on the closed connection: each got
// ErrOutcomeUnknown though none was written. Now the member on the held
// key leaves the group and the others commit; none is told "unknown".
func TestGroupCancelDuringRetryLeavesOthersDefinite(t *testing.T) {
	ctx := context.Background()
	s, ltPool := groupStoreOn(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["lock_timeout"] = "1s" })
	other := pgtest.Pool(t)
	plain, err := eventstore.New(other, &eventstore.Config{Schema: s.Schema()})
	require.NoError(t, err)
	holdBoundary(t, plain, "acct=held")

	conn, err := ltPool.Acquire(ctx)
	require.NoError(t, err)
	defer startBlocker(t, s)()
	const n = 4
	errs := make([]error, n)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		tag, c := fmt.Sprintf("acct=free%d", i), ctx
		if i == 0 {
			tag, c = "acct=held", cctx
		}
		wg.Go(func() { _, errs[i] = s.Append(c, []pgdcb.Event{pgdcb.MustEvent("Deposited", i, tag)}) })
		awaitGroup(t, s, "the call did not queue", func() bool { return eventstore.QueuedAppends(s) >= i+1 })
	}
	conn.Release()
	// The append on the held key, alone, waits for it: its caller gives up.
	awaitServer(t, "the append on the held key never waited alone", func() bool {
		return keyWaiters(t, s, other, "append_events") > 0
	})
	cancel()
	wg.Wait()
	require.Error(t, errs[0])
	for i := 1; i < n; i++ {
		require.NoError(t, errs[i], "member %d", i)
	}
	require.Zero(t, countEvents(t, s, query.Tagged(nil, "acct=held")))
	require.Equal(t, n-1, countEvents(t, s, query.Tagged([]string{"Deposited"})))
}

// A group fails with an error (a duplicate event id); its members are
// retried alone on the same connection, and the connection is lost after
// the first retry: the members not yet sent go back to the queue, each is
// then sent alone on another connection, and each gets a definite answer.
// Before the fix they were "sent" on the closed connection and got
// ErrOutcomeUnknown.
func TestGroupRetryAfterLostConnectionRequeues(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	dup := pgdcb.MustEvent("Stored", 0, "dup=1")
	dup.ID = uuid.New()
	_, err := s.Append(ctx, []pgdcb.Event{dup})
	require.NoError(t, err)
	var closed atomic.Bool
	eventstore.SetGroupRetryHook(s, func(conn *pgxpool.Conn, i int) {
		if i == 1 && closed.CompareAndSwap(false, true) {
			require.NoError(t, conn.Conn().Close(ctx))
		}
	})
	before := s.GroupStats()
	_, errs := inOneGroup(t, s, pool, 4, func(i int) (pgdcb.AppendResult, error) {
		if i == 1 {
			return s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", i, "m=x"), dup})
		}
		return s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", i, fmt.Sprintf("m=%d", i))})
	})
	require.True(t, closed.Load(), "the connection was closed between two retries")
	for i, err := range errs {
		require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown, "member %d", i)
		if i == 1 {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err, "member %d", i)
	}
	st := s.GroupStats().Sub(before)
	require.Equal(t, int64(4), st.Retried, "%+v", st)
	require.Equal(t, int64(3), st.Requeued, "%+v", st)
	require.Equal(t, 0, countEvents(t, s, query.Tagged(nil, "m=x")))
	require.Equal(t, 3, countEvents(t, s, query.Tagged([]string{"Other"})))
}

// The store's own sends never find each other's keys busy: 16 writers of
// conditional appends that all take one tag's key exclusively are decided
// in groups, each group waiting in the queue for the one in flight, and no
// append takes the busy-key path (nothing else holds the key). Without the
// in-flight check, concurrent groups and calls sent at once found the key
// busy and most appends were sent one commit each.
func TestGroupOwnSendsNeverBusy(t *testing.T) {
	ctx := context.Background()
	s := groupedStore(t)
	const writers, each = 16, 10
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("id=%d-%d", w, i)
				_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Hot", i, "hot=1", id)},
					appendif.Condition{Idempotency: query.Tagged(nil, "hot=1", id)})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := s.GroupStats()
	require.Zero(t, st.Busy, "%+v", st)
	require.Equal(t, writers*each, countEvents(t, s, query.Tagged([]string{"Hot"}, "hot=1")))
}
