package eventstore_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
)

func evs(e ...pgdcb.Event) []pgdcb.Event { return e }

// warnings is a slog.Handler that keeps the messages of Warn and above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// lossyProxy forwards TCP connections to the test server. Once armed, the
// first connection whose client sends bytes containing the marker goes
// dead after those bytes (a network that died after the request went out):
// the request reaches the server, which runs and commits it, and nothing
// more passes either way (not pgx's Terminate message when it gives up on
// the connection). The server side stays connected: the backend lives on.
type lossyProxy struct {
	ln     net.Listener
	target string
	marker []byte
	armed  atomic.Bool
	hit    atomic.Int64 // connections that lost their answers
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newLossyProxy(t *testing.T, target string, marker string) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &lossyProxy{ln: ln, target: target, marker: []byte(marker)}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *lossyProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var lost atomic.Bool
		p.wg.Go(func() { // client → server
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 && !lost.Load() {
					if bytes.Contains(buf[:n], p.marker) && p.armed.CompareAndSwap(true, false) {
						lost.Store(true)
						p.hit.Add(1)
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if !lost.Load() {
						// A connection that lost its answers keeps its
						// server side open (until the test ends), as a
						// dead network would: the backend lives on.
						_ = s.Close()
					}
					return
				}
			}
		})
		p.wg.Go(func() { // server → client
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && !lost.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					_ = c.Close()
					return
				}
			}
		})
	}
}

// lossyStore is a store whose pool connects through a lossyProxy.
func lossyStore(t *testing.T, marker string, maxConns int32, cfg *eventstore.Config) (*eventstore.Store, *lossyProxy) {
	t.Helper()
	pcfg := pgtest.Pool(t).Config()
	p := newLossyProxy(t, net.JoinHostPort(pcfg.ConnConfig.Host, strconv.Itoa(int(pcfg.ConnConfig.Port))), marker)
	host, port, err := net.SplitHostPort(p.ln.Addr().String())
	require.NoError(t, err)
	pcfg.ConnConfig.Host = host
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	pcfg.ConnConfig.Port = uint16(n)
	pcfg.MaxConns = maxConns
	app := "pgdcb_lossy_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	pcfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := teststore.OnPool(t, pool, cfg)
	// First of the cleanups: end the backends left behind a dead connection
	// (one whose request never ended with its Sync holds its transaction
	// open, and with it the database's horizon) and wait until they are gone.
	admin := pgtest.Pool(t)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
			WHERE application_name = $1`, app)
		assert.NoError(t, err)
	})
	return st, p
}

// positionsOf returns the positions of the events tagged tag, in log order.
func positionsOf(t *testing.T, s *eventstore.Store, tag string) []int64 {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), query.Tagged(nil, tag), nil)
	require.NoError(t, err)
	var pos []int64
	for _, e := range evs {
		pos = append(pos, e.Position)
	}
	return pos
}

// An append that committed but whose answer never reached the client is
// settled as present: the caller gets the positions it would have got, and
// the events are in the log once. Without settling it is an unknown outcome.
func TestSettlePresentWhenAnswerLost(t *testing.T) {
	for _, settle := range []bool{true, false} {
		for _, conditional := range []bool{false, true} {
			name := map[bool]string{false: "Append", true: "AppendIf"}[conditional] + map[bool]string{true: "/settled", false: "/SettleDisabled"}[settle]
			t.Run(name, func(t *testing.T) {
				s, p := lossyStore(t, "lost-answer", 2, &eventstore.Config{SettleDisabled: !settle})
				ctx := context.Background()
				_, err := s.Append(ctx, evs(pgdcb.MustEvent("Warm", 1, "w=1")))
				require.NoError(t, err)

				p.armed.Store(true)
				batch := []pgdcb.Event{
					pgdcb.MustEvent("Lost", "lost-answer", "acct=1"),
					pgdcb.MustEvent("Lost", 2, "acct=1"),
					pgdcb.MustEvent("Lost", 3, "acct=1"),
				}
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				var res pgdcb.AppendResult
				if conditional {
					res, err = s.AppendIf(cctx, batch, appendif.FailIf(query.Tagged(nil, "acct=1"), nil))
				} else {
					res, err = s.Append(cctx, batch)
				}
				require.EqualValues(t, 1, p.hit.Load(), "the answer was lost")
				stored := positionsOf(t, s, "acct=1")
				require.Len(t, stored, 3, "the append committed, once")
				if !settle {
					require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
					return
				}
				require.NoError(t, err)
				require.Equal(t, stored, res.Positions, "the settled answer is the log's")
				require.NotZero(t, res.TransactionID)
				st := s.SettleStats()
				require.EqualValues(t, 1, st.Present, "%+v", st)
				require.Zero(t, st.Absent+st.Resent+st.Unknown, "%+v", st)
				require.EqualValues(t, 1, st.Terminated, "the old backend, idle but alive, was terminated: %+v", st)
			})
		}
	}
}

// The members of a group whose answer was lost are settled one by one:
// every member that committed gets its own positions; a member whose
// condition failed in the group (nothing written) is absent.
func TestSettleGroupMembers(t *testing.T) {
	ls, p := lossyStore(t, "lost-group", 4, nil)
	// A group test: grouping on, whatever PGDCB_TEST_GROUP_COMMIT says.
	s, err := eventstore.New(ls.Pool(), &eventstore.Config{Schema: ls.Schema(), GroupSenders: 1})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = s.Append(ctx, evs(pgdcb.MustEvent("Taken", 1, "dup=1")))
	require.NoError(t, err)
	// The store's connections are held and the only sender's place is taken
	// by an append waiting for one: the next appends queue behind it and go
	// out as one group once the connections are free.
	awaitGroup(t, s, "the previous sender did not end", func() bool { return eventstore.GroupSenders(s) == 0 })
	var held []*pgxpool.Conn
	t.Cleanup(func() { // before the pool closes, should the test fail early
		for _, c := range held {
			c.Release()
		}
	})
	for range 4 {
		c, err := s.Pool().Acquire(ctx)
		require.NoError(t, err)
		held = append(held, c)
	}
	blocker := startBlocker(t, s)
	const members = 5
	type out struct {
		i   int
		res pgdcb.AppendResult
		err error
	}
	outs := make(chan out, members)
	p.armed.Store(true)
	for i := range members {
		go func() {
			// The group's call waits for its lost answer until every
			// member's context has ended.
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			data := any(i)
			if i == 2 {
				data = "lost-group"
			}
			tag := "m=" + strconv.Itoa(i)
			var res pgdcb.AppendResult
			var err error
			if i == 4 { // fails its condition inside the group
				res, err = s.AppendIf(ctx, evs(pgdcb.MustEvent("M", data, tag)),
					appendif.FailIf(query.Tagged(nil, "dup=1"), nil))
			} else {
				res, err = s.Append(ctx, evs(pgdcb.MustEvent("M", data, tag)))
			}
			outs <- out{i, res, err}
		}()
	}
	awaitGroup(t, s, "the members did not queue", func() bool { return eventstore.QueuedAppends(s) == members })
	for _, c := range held {
		c.Release()
	}
	blocker()
	for range members {
		o := <-outs
		if o.i == 4 {
			// Its condition failed in the group: nothing written, and its
			// context had ended, so it is not sent again.
			var na *eventstore.NotAppliedError
			require.ErrorAs(t, o.err, &na)
			require.ErrorIs(t, o.err, context.DeadlineExceeded)
			require.Empty(t, positionsOf(t, s, "m=4"))
			continue
		}
		require.NoError(t, o.err, "member %d", o.i)
		require.Equal(t, positionsOf(t, s, "m="+strconv.Itoa(o.i)), o.res.Positions, "member %d", o.i)
	}
	require.EqualValues(t, 1, p.hit.Load(), "the group's answer was lost")
	st := s.SettleStats()
	require.EqualValues(t, members, st.Settled, "%+v", st)
	require.EqualValues(t, members-1, st.Present, "%+v", st)
	require.EqualValues(t, 1, st.Absent, "the member whose condition failed: %+v", st)
	require.Zero(t, st.Resent, "%+v", st)
	require.EqualValues(t, 1, s.GroupStats().Groups)
}

// An append whose context ends while it waits for a key is settled as
// absent (its backend can no longer commit), and the caller gets a definite
// error carrying the context's; without settling the outcome is unknown.
func TestSettleAbsentWhenContextEndsMidCall(t *testing.T) {
	for _, settle := range []bool{true, false} {
		t.Run(map[bool]string{true: "settled", false: "SettleDisabled"}[settle], func(t *testing.T) {
			s, _ := newStore(t, &eventstore.Config{SettleDisabled: !settle})
			holder := holdBoundary(t, s, "acct=1")
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := s.Append(ctx, evs(pgdcb.MustEvent("Deposited", 1, "acct=1")))
			require.ErrorIs(t, err, context.DeadlineExceeded, "the cause is kept")
			if !settle {
				require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
				return
			}
			require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
			var na *eventstore.NotAppliedError
			require.ErrorAs(t, err, &na)
			// (Its backend may be gone already: pgx cancels the statement
			// and closes the connection when the context ends.)
			st := s.SettleStats()
			require.EqualValues(t, 1, st.Absent, "%+v", st)
			// The backend is gone: releasing the key lets nothing through.
			require.NoError(t, holder.Rollback(context.Background()))
			require.Zero(t, countTagged(t, s, "acct=1"))
		})
	}
}

// A backend terminated while the append waits (what a restart does to
// every backend) is settled as absent and the append is sent again: the
// caller sees it succeed, and the log holds it once.
func TestSettleResendsWhenBackendTerminated(t *testing.T) {
	s, pool := newStore(t, nil)
	holder := holdBoundary(t, s, "acct=2")
	ctx := context.Background()
	done := make(chan error, 1)
	var res pgdcb.AppendResult
	go func() {
		var err error
		res, err = s.Append(ctx, evs(pgdcb.MustEvent("Deposited", 1, "acct=2")))
		done <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '.append_events%'
			  AND pid <> pg_backend_pid()`, ident.Schema(s)).Scan(&n))
		return n > 0
	}, 30*time.Second, 10*time.Millisecond, "the append never waited")
	// The resend waits for the key again.
	require.Eventually(t, func() bool { return s.SettleStats().Resent == 1 }, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-done)
	require.Equal(t, positionsOf(t, s, "acct=2"), res.Positions)
	st := s.SettleStats()
	require.EqualValues(t, 1, st.Absent, "%+v", st)
	require.Zero(t, st.Unknown, "%+v", st)
}

// A server that cannot be reached for the settle budget leaves the outcome
// unknown, after about the budget (not the call's whole deadline).
func TestSettleBudgetRunsOut(t *testing.T) {
	s, p := lossyStore(t, "no-server", 1, &eventstore.Config{SettleTimeout: 200 * time.Millisecond, GroupCommitDisabled: true})
	ctx := context.Background()
	_, err := s.Append(ctx, evs(pgdcb.MustEvent("Warm", 1, "w=1")))
	require.NoError(t, err)
	// The answer is lost, and then the proxy refuses new connections.
	p.armed.Store(true)
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	go func() {
		await.Within(time.Minute, func() (bool, string) { return p.hit.Load() != 0 || cctx.Err() != nil, "" })
		_ = p.ln.Close()
	}()
	_, err = s.Append(cctx, evs(pgdcb.MustEvent("E", "no-server", "b=1")))
	require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown, "got %v", err)
	require.EqualValues(t, 1, s.SettleStats().Unknown)
}

// Close waits for the background work of appends (notifications, group
// senders), after which appends are refused; closing the pool right after
// Close logs nothing (before, the notification in flight met a closed pool:
// "notify failed; readers will poll").
func TestCloseWaitsAndRefuses(t *testing.T) {
	var logs warnings
	s, pool := newStore(t, &eventstore.Config{Logger: slog.New(&logs)})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				_, err := s.Append(ctx, evs(pgdcb.MustEvent("E", i, "c="+strconv.Itoa(w))))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.Close(ctx))
	require.Zero(t, eventstore.BackgroundActive(s), "nothing runs after Close")
	pool.Close()
	require.Empty(t, logs.all(), "nothing met the closed pool")
	_, err := s.Append(ctx, evs(pgdcb.MustEvent("E", 1, "c=1")))
	require.ErrorIs(t, err, pgdcb.ErrClosed)
	s.Notify(ctx) // a no-op now
	require.Zero(t, eventstore.BackgroundActive(s))
	require.NoError(t, s.Close(ctx), "again")
}

// A call whose first event reuses an id stored by an earlier call, and whose
// answer is lost, is not settled as that earlier call: the events found from
// the id (as many as the call has, in the earlier call's transaction) are
// another call's, told apart by their types and ids. It is absent (it could
// not have stored the id again), and sent again it fails definitely.
func TestSettleNeverTakesAnotherCallsEvents(t *testing.T) {
	s, p := lossyStore(t, "reused-id", 2, nil)
	ctx := context.Background()
	id := uuid.New()
	first := pgdcb.MustEvent("X", 1, "r=1")
	first.ID = id
	earlier, err := s.Append(ctx, evs(first, pgdcb.MustEvent("Other", 2, "r=1")))
	require.NoError(t, err)

	p.armed.Store(true)
	reuse := pgdcb.MustEvent("Z", "reused-id", "r=2")
	reuse.ID = id
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := s.Append(cctx, evs(reuse, pgdcb.MustEvent("Z2", 2, "r=2")))
	require.EqualValues(t, 1, p.hit.Load(), "the answer was lost")
	require.Error(t, err, "not the earlier call's result (positions %v)", res.Positions)
	require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
	require.NotEqual(t, earlier.Positions, res.Positions)
	require.Empty(t, positionsOf(t, s, "r=2"))
	st := s.SettleStats()
	require.Zero(t, st.Present, "%+v", st)
	require.EqualValues(t, 1, st.Absent, "%+v", st)
}

// A member that a sender took from the queue but has not sent yet when its
// caller's context ends is answered at once with a definite error (the
// context's), never ErrOutcomeUnknown, and is never sent afterwards. Here
// the sender is held before the member's turn (its group failed with an
// error and the members are retried one by one) until the caller has
// returned, longer than the settle budget. Before the fix the caller took
// "taken" for "sent", waited out the settle budget and answered "unknown"
// though nothing had been sent.
func TestSettleTakenButUnsentIsDefinite(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t, func(c *eventstore.Config) { c.SettleTimeout = 100 * time.Millisecond })
	dup := pgdcb.MustEvent("Stored", 0, "dup=1")
	dup.ID = uuid.New()
	_, err := s.Append(ctx, evs(dup))
	require.NoError(t, err)

	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	returned := make(chan struct{})
	var held atomic.Bool
	eventstore.SetGroupRetryHook(s, func(_ *pgxpool.Conn, i int) {
		if i != 1 || !held.CompareAndSwap(false, true) {
			return
		}
		// Member 1 is taken, not sent: its caller gives up now, and the
		// sender waits until it has its answer (a deadline, not a sleep:
		// the answer comes at once with the fix, after the settle budget
		// without it).
		cancel()
		select {
		case <-returned:
		case <-time.After(time.Minute):
			t.Error("the abandoned member's caller never returned")
		}
	})
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	wait := startBlocker(t, s)
	_, errs := queueInOrder(t, s, conn, []func() (pgdcb.AppendResult, error){
		func() (pgdcb.AppendResult, error) { // fails the group: its id is stored
			return s.Append(ctx, evs(pgdcb.MustEvent("Other", 0, "m=0"), dup))
		},
		func() (pgdcb.AppendResult, error) {
			defer close(returned)
			return s.Append(mctx, evs(pgdcb.MustEvent("Other", 1, "m=1")))
		},
		func() (pgdcb.AppendResult, error) {
			return s.Append(ctx, evs(pgdcb.MustEvent("Other", 2, "m=2")))
		},
	})
	wait()
	require.True(t, held.Load(), "the members were retried one by one")
	require.Error(t, errs[0])
	require.NotErrorIs(t, errs[0], pgdcb.ErrOutcomeUnknown)
	require.ErrorIs(t, errs[1], context.Canceled)
	require.NotErrorIs(t, errs[1], pgdcb.ErrOutcomeUnknown, "member 1 was never sent")
	require.NoError(t, errs[2])
	require.Empty(t, positionsOf(t, s, "m=1"), "the abandoned member is never sent")
	require.Len(t, positionsOf(t, s, "m=2"), 1)
	st := s.SettleStats()
	require.Zero(t, st.Settled+st.Unknown, "%+v", st)
}
