package subscription_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/tailpolls"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// wait bounds every Eventually: an open transaction anywhere in the cluster
// (other test packages share the server) holds the horizon back and delays
// tailing readers for as long as it stays open.
const wait = 90 * time.Second

// collector gathers what a handler received.
type collector struct {
	mu  sync.Mutex
	evs []pgdcb.StoredEvent
	cur cursor.Cursor
}

func (c *collector) handle(_ context.Context, b subscription.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, b.Events...)
	c.cur = b.Cursor
	return nil
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.evs)
}

func (c *collector) events() []pgdcb.StoredEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pgdcb.StoredEvent(nil), c.evs...)
}

func run(t *testing.T, sub *subscription.Subscription, from cursor.Cursor, h subscription.Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sub.Run(ctx, from, h) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func requireLogOrder(t *testing.T, evs []pgdcb.StoredEvent) {
	t.Helper()
	seen := map[int64]bool{}
	for i, ev := range evs {
		require.False(t, seen[ev.Position], "position %d delivered twice", ev.Position)
		seen[ev.Position] = true
		if i > 0 {
			p := evs[i-1]
			require.True(t, p.TransactionID < ev.TransactionID ||
				(p.TransactionID == ev.TransactionID && p.Position < ev.Position),
				"event %d (%d,%d) after (%d,%d)", i, ev.TransactionID, ev.Position, p.TransactionID, p.Position)
		}
	}
}

func TestCatchUpThenLive(t *testing.T) {
	t.Parallel()
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprintf("notify=%v", notify), func(t *testing.T) {
			s, _ := newStore(t, "")
			appendN(t, s, "Added", 0, 2500)
			appendN(t, s, "Other", 0, 300)
			sub, err := subscription.New(s, query.Tagged([]string{"Added"}), &subscription.Config{
				BatchSize: 1000, PollInterval: 20 * time.Millisecond, NotifyDisabled: !notify})
			require.NoError(t, err)
			var c collector
			stop := run(t, sub, cursor.Cursor{}, c.handle)
			require.Eventually(t, func() bool { return c.len() == 2500 }, wait, 5*time.Millisecond)
			appendN(t, s, "Added", 2500, 10)
			require.Eventually(t, func() bool { return c.len() == 2510 }, wait, 5*time.Millisecond)
			require.ErrorIs(t, stop(), context.Canceled)
			evs := c.events()
			requireLogOrder(t, evs)
			for i, ev := range evs {
				require.Equal(t, "Added", ev.Type)
				var d struct{ N int }
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				require.Equal(t, i, d.N)
			}
			// Resuming from the last cursor delivers nothing again.
			sub2, err := subscription.New(s, query.Tagged([]string{"Added"}), &subscription.Config{PollInterval: 10 * time.Millisecond})
			require.NoError(t, err)
			var c2 collector
			stop2 := run(t, sub2, c.cur, c2.handle)
			appendN(t, s, "Added", 2510, 1)
			require.Eventually(t, func() bool { return c2.len() == 1 }, wait, 5*time.Millisecond)
			require.NoError(t, ignoreCanceled(stop2()))
			require.Equal(t, c.len()+1, len(c.events())+len(c2.events()))
		})
	}
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Writer A takes a lower position and commits after writer B: the
// subscription must deliver both, A first (log order), never B alone first.
// Not parallel: A's open transaction holds back every tailing reader.
func TestOutOfOrderCommit(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s, pool := newStore(t, "")
			ctx := context.Background()
			polls := tailpolls.New(s)
			sub, err := subscription.New(polls, query.All(), &subscription.Config{PollInterval: 5 * time.Millisecond})
			require.NoError(t, err)
			var c collector
			run(t, sub, cursor.Cursor{}, c.handle)

			txA, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
			require.NoError(t, err)
			defer txA.Rollback(ctx)
			resA, err := s.AppendTx(ctx, txA, []pgdcb.Event{pgdcb.MustEvent("A", map[string]int{}, "w=a")})
			require.NoError(t, err)
			resB, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("B", map[string]int{}, "w=b")})
			require.NoError(t, err)
			require.Less(t, resA.Positions[0], resB.Positions[0])

			// B is committed, but A (lower position, older transaction) is
			// not: B must not be delivered yet, or A would land behind the
			// cursor. Let the subscription poll several times (counted: a
			// sleep on a loaded machine may cover no poll at all; few, as
			// A's open transaction holds back every tailing reader).
			polls.Await(t, 5, wait)
			require.Zero(t, c.len(), "B delivered while A was still open")
			require.NoError(t, txA.Commit(ctx))
			require.Eventually(t, func() bool { return c.len() == 2 }, wait, 2*time.Millisecond)
			evs := c.events()
			require.Equal(t, "A", evs[0].Type)
			require.Equal(t, "B", evs[1].Type)
			requireLogOrder(t, evs)
		})
	}
}

// The subscription survives the loss of every connection (its LISTEN
// connection and the pool's): with NOTIFY and a poll interval too long to
// matter, the LISTEN connection must come back; with polling only, the reads
// must.
func TestReconnects(t *testing.T) {
	t.Parallel()
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprintf("notify=%v", notify), func(t *testing.T) {
			poll := 20 * time.Millisecond
			if notify {
				poll = time.Hour
			}
			app := fmt.Sprintf("pgdcb_sub_test_%d_%d", os.Getpid(), time.Now().UnixNano())
			s, _ := newStore(t, app)
			admin := adminPool(t)
			// Append through a pool the test does not terminate.
			writer, err := eventstore.New(admin, &eventstore.Config{Schema: s.Schema()})
			require.NoError(t, err)
			sub, err := subscription.New(s, query.All(), &subscription.Config{PollInterval: poll, NotifyDisabled: !notify,
				RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
			require.NoError(t, err)
			var c collector
			run(t, sub, cursor.Cursor{}, c.handle)
			if notify { // the first wake-up comes from LISTEN starting
				require.Eventually(t, func() bool { return listening(t, admin, app) }, wait, 5*time.Millisecond)
			}
			appendN(t, writer, "E", 0, 10)
			require.Eventually(t, func() bool { return c.len() == 10 }, wait, 5*time.Millisecond)
			for i := range 3 {
				var n int
				require.NoError(t, admin.QueryRow(context.Background(),
					`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
				require.Positive(t, n)
				if notify {
					require.Eventually(t, func() bool { return listening(t, admin, app) }, wait, 5*time.Millisecond)
				}
				appendN(t, writer, "E", 10+i*10, 10)
				want := 20 + i*10
				require.Eventually(t, func() bool { return c.len() == want }, wait, 5*time.Millisecond)
			}
			requireLogOrder(t, c.events())
		})
	}
}

// listening: a connection of app is LISTENing (its last statement was LISTEN).
func listening(t *testing.T, admin *pgxpool.Pool, app string) bool {
	var n int
	require.NoError(t, admin.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&n))
	return n > 0
}

func adminPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return pgtestPool(t)
}

func TestHandlerErrorStops(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, "")
	appendN(t, s, "E", 0, 5)
	sub, err := subscription.New(s, query.All(), nil)
	require.NoError(t, err)
	boom := errors.New("boom")
	err = sub.Run(context.Background(), cursor.Cursor{}, func(context.Context, subscription.Batch) error { return boom })
	var he *subscription.HandlerError
	require.ErrorAs(t, err, &he)
	require.ErrorIs(t, err, boom)
	// The cursor before the failed batch: it may have moved up to the horizon
	// (an empty read), never past the first event.
	evs, _, err := s.ReadAll(context.Background(), query.All(), nil)
	require.NoError(t, err)
	require.Less(t, he.Cursor.TransactionID, evs[0].TransactionID)
}

func TestInvalidQuery(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, "")
	_, err := subscription.New(s, query.Query{}, nil)
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
}
