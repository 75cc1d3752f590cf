package faults_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jackc/pgx/v5"
	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/tailpolls"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// deliveries records what a subscription handed to its handler.
type deliveries struct {
	mu      sync.Mutex
	events  []pgdcb.StoredEvent
	count   map[int64]int // by position
	cursors []cursor.Cursor
}

func (d *deliveries) handle(_ context.Context, b subscription.Batch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.count == nil {
		d.count = map[int64]int{}
	}
	for _, ev := range b.Events {
		d.events = append(d.events, ev)
		d.count[ev.Position]++
	}
	d.cursors = append(d.cursors, b.Cursor)
	return nil
}

// times returns how often the event at pos was delivered.
func (d *deliveries) times(pos int64) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count[pos]
}

func (d *deliveries) lastCursor() cursor.Cursor {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cursors[len(d.cursors)-1]
}

func (d *deliveries) all() []pgdcb.StoredEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]pgdcb.StoredEvent(nil), d.events...)
}

// Scenario 4. A subscription (LISTEN, 100 ms polls, batches of 2) follows
// the log through three phases; in each, every event appended must be
// delivered exactly once, and all deliveries come in log order:
//
//   - short page: three events in one transaction while the next
//     transaction id is held open, so that the second page is short with the
//     horizon right above it (issue 10, §1: the cursor did not move and the
//     last event came again at every poll);
//   - clean restart: events before and after a fast shutdown and start;
//   - crash: one event, delivered, its notification run (it takes a
//     transaction id whose commit record is not flushed: wal_writer_delay is
//     10 s and autovacuum off meanwhile, so nothing else flushes it), the tail
//     cursor moved past it; then an immediate shutdown and a start, which
//     hands that id out again to the next append. It must be delivered, and
//     an AppendIf after the cursor of the last batch before the crash (or of
//     a tailing read taken then) must fail: a matching event exists that it
//     never saw (issue 10, §1: the cursor was (horizon-1, MaxInt64), so the
//     event sorted behind it: never delivered, and the AppendIf committed).
func TestSubscriptionAcrossRestartAndCrash(t *testing.T) {
	s := cluster(t)
	began := time.Now()
	e := newEnv(t)
	pool := newPool(t, "faults_sub", 8, nil)
	store := e.store(t, pool, nil)
	quiet := e.store(t, pool, &eventstore.Config{NotifyDisabled: true})
	q := query.Tagged([]string{"S"})

	rec := &deliveries{}
	polls := tailpolls.New(store)
	sub, err := subscription.New(polls, q, &subscription.Config{Name: "faults", BatchSize: 2,
		PollInterval: 100 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sub.Run(ctx, cursor.Start, rec.handle) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()

	var appended []int64 // positions of every S event, as acknowledged or found committed
	var unknown, unknownCommitted int
	seq := 0
	// appendS appends n S events and returns where they are. Each event
	// carries an id, so a retry is safe whatever happened to the call
	// before: right after a start, the pool's old connections fail once
	// each, either before sending (a definite error: nothing stored) or
	// after (ErrOutcomeUnknown: an EOF after the request left may come from
	// a commit that happened). A retry of a batch that was stored fails with
	// ErrIdempotent; the batch is then read back from the log, and must be
	// there whole, in one transaction.
	appendS := func(t *testing.T, st *eventstore.Store, n int) pgdcb.AppendResult {
		t.Helper()
		seq++
		evs := batch("S", fmt.Sprint("s-", seq), n)
		for i := range evs {
			evs[i].ID = uuid.New()
		}
		var res pgdcb.AppendResult
		var err error
		wasUnknown := false
		await.Within(10*time.Second, func() (bool, string) { // retried, not a verdict
			if res, err = st.Append(t.Context(), evs); err == nil {
				return true, ""
			}
			if errors.Is(err, pgdcb.ErrOutcomeUnknown) && !wasUnknown {
				wasUnknown = true
				unknown++
			}
			if errors.Is(err, pgdcb.ErrIdempotent) {
				require.True(t, wasUnknown, "ErrIdempotent for ids never acknowledged nor left unknown: %v", err)
				unknownCommitted++
				res = committedBatch(t, st, q, evs)
				err = nil
				return true, ""
			}
			return false, ""
		})
		require.NoError(t, err)
		appended = append(appended, res.Positions...)
		return res
	}
	// requireOnce waits for the events at positions, then for three more
	// polls of the subscription (a redelivery would come in one of them:
	// the reader did not move its cursor past the last event, issue 10),
	// and requires each delivered exactly once.
	requireOnce := func(t *testing.T, positions []int64) {
		t.Helper()
		waitUntil(t, "events at positions "+fmt.Sprint(positions)+" delivered", func() bool {
			for _, p := range positions {
				if rec.times(p) == 0 {
					return false
				}
			}
			return true
		})
		polls.Await(t, 3, waitTimeout)
		for _, p := range positions {
			require.Equal(t, 1, rec.times(p), "deliveries of the event at position %d", p)
		}
	}
	var notes []string
	var recovery time.Duration

	t.Run("short page", func(t *testing.T) {
		res := appendS(t, quiet, 3)
		tx, err := e.admin.Begin(t.Context())
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.Background()) }()
		var next uint64
		require.NoError(t, tx.QueryRow(t.Context(), `SELECT pg_current_xact_id()::text::bigint`).Scan(&next))
		notes = append(notes, fmt.Sprintf("short page: open transaction took the next id: %v", next == res.TransactionID+1))
		polls.Await(t, 6, waitTimeout) // the subscription polls with the next id held open
		require.NoError(t, tx.Rollback(t.Context()))
		requireOnce(t, res.Positions)
	})

	t.Run("clean restart", func(t *testing.T) {
		var before, after []int64
		for range 5 {
			before = append(before, appendS(t, store, 2).Positions...)
		}
		requireOnce(t, before)
		require.NoError(t, s.Restart(t.Context()))
		for range 5 {
			after = append(after, appendS(t, store, 2).Positions...)
		}
		requireOnce(t, after)
	})

	t.Run("crash", func(t *testing.T) {
		// Nothing but a synchronous commit may flush the WAL meanwhile.
		setSystem(t, map[string]string{"wal_writer_delay": "'10s'", "autovacuum": "off"})
		e1 := appendS(t, store, 1)
		requireOnce(t, e1.Positions) // includes three polls after it: the tail moved on
		tail, err := store.ReadTail(t.Context(), q, rec.lastCursor(), 100)
		require.NoError(t, err)
		require.Empty(t, tail.Events)
		batchCursor := rec.lastCursor()
		var horizon uint64
		require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&horizon))

		require.NoError(t, s.Crash(t.Context()))
		started := time.Now()
		require.NoError(t, s.Start(t.Context()))
		e2 := appendS(t, store, 1)
		reused := e2.TransactionID < horizon
		notes = append(notes, fmt.Sprintf("crash: before it, event at tx %d, horizon %d, batch cursor %v, tail cursor %v; after it, the append took tx %d (an id handed out again: %v)",
			e1.TransactionID, horizon, batchCursor, tail.Cursor, e2.TransactionID, reused))
		t.Log(notes[len(notes)-1])

		t.Run("delivered", func(t *testing.T) {
			requireOnce(t, e2.Positions)
			recovery = time.Since(started)
		})
		t.Run("AppendIf after the cursor", func(t *testing.T) {
			for name, c := range map[string]cursor.Cursor{"batch": batchCursor, "tail": tail.Cursor} {
				id := "decision-" + name
				_, err := store.AppendIf(t.Context(), batch("Decision", id, 1),
					appendif.FailIf(q, &c))
				require.ErrorIs(t, err, pgdcb.ErrConditionFailed,
					"an AppendIf after the %s cursor %v must see the event at tx %d it never saw", name, c, e2.TransactionID)
			}
		})
	})

	t.Run("exactly once in log order", func(t *testing.T) {
		logged, _, err := store.ReadAll(t.Context(), q, nil)
		require.NoError(t, err)
		var want, got []string
		for _, ev := range logged {
			want = append(want, fmt.Sprintf("(%d,%d)", ev.TransactionID, ev.Position))
		}
		for _, ev := range rec.all() {
			got = append(got, fmt.Sprintf("(%d,%d)", ev.TransactionID, ev.Position))
		}
		require.Equal(t, strings.Join(want, " "), strings.Join(got, " "), "deliveries against the log")
	})

	// Figures: the log's S events against the deliveries.
	var f figures
	f.Scenario = "4 subscription"
	f.Attempts, f.Acked = len(appended), len(appended)-unknownCommitted
	f.Unknown, f.UnknownCommitted = unknown, unknownCommitted
	for _, p := range appended {
		switch n := rec.times(p); {
		case n == 0:
			f.Lost++
		case n > 1:
			f.Duplicated += n - 1
		}
	}
	f.Recovery = recovery
	f.Elapsed = time.Since(began)
	f.Note = strings.Join(notes, "; ")
	record(t, f)
	require.Zero(t, f.Lost, "events never delivered")
	require.Zero(t, f.Duplicated, "events delivered more than once")
}

// committedBatch reads back a batch that a retry found stored (its ids
// matched): every event of it, in one transaction, in batch order.
func committedBatch(t *testing.T, st *eventstore.Store, q query.Query, evs []pgdcb.Event) pgdcb.AppendResult {
	t.Helper()
	logged, _, err := st.ReadAll(t.Context(), q, nil)
	require.NoError(t, err)
	byID := map[uuid.UUID]pgdcb.StoredEvent{}
	for _, ev := range logged {
		byID[ev.ID] = ev
	}
	var res pgdcb.AppendResult
	for i, ev := range evs {
		got, ok := byID[ev.ID]
		require.True(t, ok, "event %d of a batch found stored by its first id is missing: a partial append", i)
		if i == 0 {
			res.TransactionID = got.TransactionID
		}
		require.Equal(t, res.TransactionID, got.TransactionID, "the events of one append in one transaction")
		res.Positions = append(res.Positions, got.Position)
	}
	return res
}

// waitTimeout bounds every wait of the suite for something to happen. It
// only decides how long a failure takes to be reported: on a loaded
// machine a wait that succeeds may take long, and a deadline in seconds
// would turn load into failures.
const waitTimeout = 2 * time.Minute

// waitUntil polls cond until it holds, failing the test after waitTimeout
// with what was awaited.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	await.True(t, waitTimeout, what, cond)
}

// setSystem sets server parameters with ALTER SYSTEM and reloads; the test's
// end resets them.
func setSystem(t *testing.T, params map[string]string) {
	t.Helper()
	var set, reset []string
	for k, v := range params {
		set = append(set, `ALTER SYSTEM SET `+k+` = `+v)
		reset = append(reset, `ALTER SYSTEM RESET `+k)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !srv.Running() {
			require.NoError(t, srv.Start(ctx))
		}
		require.NoError(t, serverExec(ctx, append(reset, `SELECT pg_reload_conf()`)...))
	})
	require.NoError(t, serverExec(t.Context(), append(set, `SELECT pg_reload_conf()`)...))
	// The server has taken the settings: a new session shows them.
	waitUntil(t, fmt.Sprintf("a new session shows %v", params), func() bool {
		conn, err := pgx.Connect(t.Context(), srv.DSN())
		require.NoError(t, err)
		defer conn.Close(context.Background())
		for k, v := range params {
			var got string
			require.NoError(t, conn.QueryRow(t.Context(), `SELECT current_setting($1)`, k).Scan(&got))
			if got != strings.Trim(v, "'") {
				return false
			}
		}
		return true
	})
}
