package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/eventstore"
)

// The tests below with leases or retry backoffs of a few seconds at most do
// not call t.Parallel: under the load of other tests, a lease could expire
// or a retry come due when the test counts on it not to.

// ledger is a handler's own idempotency check: what ran, per effect and per
// session, and whether two effects of a session ever ran at once.
type ledger struct {
	mu        sync.Mutex
	runs      map[string]int    // handler runs per effect id
	completed map[string]int    // successful runs per effect id
	order     map[string][]int  // per session: seq of each successful run
	running   map[string]string // per session: effect id running now
	overlaps  []string          // sessions that ran two effects at once
	attempts  map[string][]int  // per effect: attempt of each run
}

func newLedger() *ledger {
	return &ledger{runs: map[string]int{}, completed: map[string]int{}, order: map[string][]int{},
		running: map[string]string{}, attempts: map[string][]int{}}
}

type payload struct {
	Seq int `json:"seq"`
}

// handler records the run; it fails when fail says so.
func (l *ledger) handler(work time.Duration, fail func(effects.Effect) error) effects.Handler {
	return func(ctx context.Context, e effects.Effect) error {
		l.mu.Lock()
		l.runs[e.ID]++
		l.attempts[e.ID] = append(l.attempts[e.ID], e.Attempts)
		if other, busy := l.running[e.Session]; busy && other != e.ID {
			l.overlaps = append(l.overlaps, fmt.Sprintf("%s: %s while %s", e.Session, e.ID, other))
		}
		l.running[e.Session] = e.ID
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			delete(l.running, e.Session)
			l.mu.Unlock()
		}()
		if work > 0 {
			time.Sleep(work)
		}
		if fail != nil {
			if err := fail(e); err != nil {
				return err
			}
		}
		var p payload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return err
		}
		l.mu.Lock()
		l.completed[e.ID]++
		l.order[e.Session] = append(l.order[e.Session], p.Seq)
		l.mu.Unlock()
		return nil
	}
}

// requestMany requests perSession effects in each of sessions sessions, seq
// 0.. in each; it returns the ids by session, in order.
func requestMany(t testing.TB, q *effects.Queue, typ string, sessions, perSession int) map[string][]string {
	t.Helper()
	ids := map[string][]string{}
	for i := range perSession {
		for s := range sessions {
			session := fmt.Sprintf("session-%d", s)
			p, _ := json.Marshal(payload{Seq: i})
			id, created, err := q.Request(context.Background(), effects.Request{Type: typ, Session: session,
				DedupeKey: fmt.Sprintf("%s/%d", session, i), Payload: p})
			require.NoError(t, err)
			require.True(t, created)
			ids[session] = append(ids[session], id)
		}
	}
	return ids
}

// seqs returns 0, 1, …, n-1: the order in which requestMany requests each
// session's effects.
func seqs(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// totalStats adds up the workers' Stats.
func totalStats(ws []*effects.Worker) effects.Stats {
	var total effects.Stats
	for _, w := range ws {
		total = total.Add(w.Stats())
	}
	return total
}

// TestEightWorkersOneKilledMidEffect: every effect is completed exactly once
// (one effect_completed event, one successful handler run), in session order,
// although one worker is killed while its handler runs.
func TestEightWorkersOneKilledMidEffect(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	q := newQueue(t, s)
	const sessions, perSession = 6, 8
	ids := requestMany(t, q, "job", sessions, perSession)
	l := newLedger()
	cfg := func(h effects.Handler) *effects.Config {
		return &effects.Config{Lease: 2 * time.Second, PollInterval: 100 * time.Millisecond,
			Handlers: map[string]effects.Handler{"job": h}}
	}

	// The victim: its first effect blocks until the worker is killed, and
	// does not complete.
	victim, killed, kill := startVictim(t, s, cfg)
	workers := newWorkers(t, s, 7, cfg(l.handler(time.Millisecond, nil)))
	stop := startWorkers(t, workers...)
	kill()

	waitCounts(t, q, sessions*perSession, 0, 2*time.Minute)
	stop()

	total := totalStats(workers)
	require.Equal(t, int64(sessions*perSession), total.Executed, "stats: %+v", total)
	require.GreaterOrEqual(t, total.LeaseTakeovers, int64(1), "the victim's lease was taken over: %+v", total)
	require.Equal(t, int64(1), victim.Stats().Claims)
	require.Zero(t, victim.Stats().Executed)

	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.overlaps, "two effects of a session ran at once")
	for session, list := range ids {
		require.Equal(t, seqs(perSession), l.order[session], "order of session %s", session)
		for _, id := range list {
			require.Equal(t, 1, l.completed[id], "effect %s completed by its handler", id)
			require.Equal(t, 1, countEvents(t, s, effects.TypeCompleted, id), "effect_completed events of %s", id)
			e, err := q.Effect(ctx, id)
			require.NoError(t, err)
			require.Equal(t, effects.StateCompleted, e.State)
			if id == killed {
				require.Equal(t, 2, e.Attempts, "the killed effect's next attempt completed it")
				require.Equal(t, 2, countEvents(t, s, effects.TypeStarted, id))
			} else if l.runs[id] > 1 {
				// A second run is allowed only after a lease expired.
				require.Greater(t, e.Attempts, 1, "effect %s ran %d times without a takeover", id, l.runs[id])
			}
		}
	}
}

// TestSessionOrderUnderEightWorkers: with handlers of varying length, each
// session's effects run one at a time and in request order.
func TestSessionOrderUnderEightWorkers(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	q := newQueue(t, s)
	const sessions, perSession = 4, 10
	ids := requestMany(t, q, "job", sessions, perSession)
	l := newLedger()
	var n atomic.Int64
	h := l.handler(0, func(effects.Effect) error {
		time.Sleep(time.Duration(n.Add(1)%4) * time.Millisecond)
		return nil
	})
	ws := newWorkers(t, s, 8, &effects.Config{PollInterval: 100 * time.Millisecond, Handlers: map[string]effects.Handler{"job": h}})
	runUntilCounts(t, q, sessions*perSession, 0, 2*time.Minute, ws...)
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.overlaps)
	for session, list := range ids {
		require.Equal(t, seqs(perSession), l.order[session], "session %s", session)
		for _, id := range list {
			require.Equal(t, 1, l.runs[id], "no lease expired: one run of %s", id)
		}
	}
}

// TestPoisonEffectFailsWithoutBlockingOtherSessions: an effect whose handler
// always fails is retried, then failed for good with the last error; the
// other sessions run meanwhile, and its own session's next effect runs after.
func TestPoisonEffectFailsWithoutBlockingOtherSessions(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	q := newQueue(t, s)
	poison := requestJob(t, q, "sick", "poison", json.RawMessage(`{"seq":0}`))
	after := requestJob(t, q, "sick", "after", json.RawMessage(`{"seq":1}`))
	requestMany(t, q, "job", 3, 3)

	l := newLedger()
	var healthyDone atomic.Int64
	var poisonFinal atomic.Bool
	var healthyBeforePoison atomic.Int64
	h := l.handler(0, func(e effects.Effect) error {
		if e.ID == poison {
			return fmt.Errorf("boom %d", e.Attempts)
		}
		if e.Session != "sick" {
			healthyDone.Add(1)
			if !poisonFinal.Load() {
				healthyBeforePoison.Add(1)
			}
		}
		return nil
	})
	ws := newWorkers(t, s, 2, &effects.Config{MaxAttempts: 3, RetryMin: 200 * time.Millisecond, RetryMax: 400 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, Handlers: map[string]effects.Handler{"job": h}})
	stop := startWorkers(t, ws...)
	waitFor(t, time.Minute, "the poison effect failed", func() (bool, string) {
		e, err := q.Effect(ctx, poison)
		require.NoError(t, err)
		if e.State == effects.StateFailed {
			poisonFinal.Store(true)
		}
		return e.State == effects.StateFailed, fmt.Sprintf("%+v", e)
	})
	waitCounts(t, q, 1+3*3, 1, time.Minute)
	stop()

	e, err := q.Effect(ctx, poison)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, e.State)
	require.Equal(t, 3, e.Attempts)
	require.Equal(t, "boom 3", e.LastError)
	require.Equal(t, 3, countEvents(t, s, effects.TypeFailed, poison))
	require.Zero(t, countEvents(t, s, effects.TypeCompleted, poison))

	// The other sessions were not held up by the poison effect's retries.
	require.Equal(t, int64(9), healthyBeforePoison.Load(), "healthy effects done before the poison effect failed for good")
	// Its own session waited for it.
	next, err := q.Effect(ctx, after)
	require.NoError(t, err)
	require.Equal(t, effects.StateCompleted, next.State)
	require.False(t, next.LastAttemptAt.Before(e.FinishedAt), "the next effect of the session started after the poison one failed")

	total := totalStats(ws)
	require.Equal(t, int64(1), total.Failed)
	require.Equal(t, int64(2), total.Retried)
	require.Equal(t, int64(10), total.Executed)
}

// TestLateResultOfATakenOverLeaseIsNotRecorded: a handler whose lease could
// not be extended (the append hangs) and that ignores its context finishes
// after another worker took the effect over and completed it: its success is
// not recorded a second time.
func TestLateResultOfATakenOverLeaseIsNotRecorded(t *testing.T) {
	ctx := context.Background()
	s, q, id := oneEffect(t, json.RawMessage(`{"seq":0}`))
	l := newLedger()
	slowStarted := make(chan struct{})
	tr := newBlockAppends(effects.TypeLeaseExtended) // its lease cannot be extended
	slow, stopSlow := startSlow(t, s, tr, l.handler(0, func(effects.Effect) error {
		close(slowStarted)
		<-tr.release // ignores its context on purpose
		return nil
	}))
	<-slowStarted
	fast := takeOver(t, s, q, l, tr, slow, stopSlow)

	require.Equal(t, 1, countEvents(t, s, effects.TypeCompleted, id))
	e, err := q.Effect(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 2, e.Attempts)
	require.Equal(t, fast.Identity(), e.Worker)
	require.Equal(t, int64(1), fast.Stats().LeaseTakeovers)
	require.Zero(t, slow.Stats().Executed)
	require.Equal(t, 2, l.runs[id], "ran twice: once per lease")
}

// appendStartTracer is the rest of an eventstore.Tracer for the test tracers
// below, which act in TraceAppendStart only.
type appendStartTracer struct{}

func (appendStartTracer) TraceAppendEnd(context.Context, eventstore.TraceAppendEndData) {}
func (appendStartTracer) TraceReadStart(ctx context.Context, _ eventstore.TraceReadStartData) context.Context {
	return ctx
}
func (appendStartTracer) TraceReadEnd(context.Context, eventstore.TraceReadEndData) {}

// blockAppends is a Tracer that holds every append of one event of type typ
// until release is closed (it never calls the store).
type blockAppends struct {
	appendStartTracer
	typ     string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlockAppends(typ string) *blockAppends {
	return &blockAppends{typ: typ, held: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockAppends) TraceAppendStart(ctx context.Context, d eventstore.TraceAppendStartData) context.Context {
	if len(d.Events) == 1 && d.Events[0].Type == b.typ {
		b.once.Do(func() { close(b.held) })
		<-b.release
	}
	return ctx
}

// TestCompletionRacingATakeoverIsRefused: a worker read its claim as still
// its own, then its lease expired and another worker took the effect over
// and completed it before the first worker's completion reached the server:
// the completion's condition refuses it, and the effect is completed once.
func TestCompletionRacingATakeoverIsRefused(t *testing.T) {
	s, q, id := oneEffect(t, json.RawMessage(`{"seq":0}`))
	tr := newBlockAppends(effects.TypeCompleted)
	l := newLedger()
	slow, stopSlow := startSlow(t, s, tr, l.handler(0, nil))
	select {
	case <-tr.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow worker never tried to complete")
	}
	fast := takeOver(t, s, q, l, tr, slow, stopSlow)
	require.Equal(t, 1, countEvents(t, s, effects.TypeCompleted, id))
	require.Zero(t, slow.Stats().Executed)
	require.Equal(t, int64(1), fast.Stats().Executed)
}

// TestExpiredLastLeaseFailsTheEffect: when the last attempt's worker dies,
// the next worker fails the effect for good instead of claiming it, and the
// session moves on.
func TestExpiredLastLeaseFailsTheEffect(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	q := newQueue(t, s)
	first := requestJob(t, q, "s", "first", json.RawMessage(`{"seq":0}`))
	second := requestJob(t, q, "s", "second", json.RawMessage(`{"seq":1}`))
	cfg := func(h effects.Handler) *effects.Config {
		return &effects.Config{MaxAttempts: 1, Lease: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond,
			Handlers: map[string]effects.Handler{"job": h}}
	}
	_, _, kill := startVictim(t, s, cfg)
	kill()

	l := newLedger()
	w, err := effects.NewWorker(s, cfg(l.handler(0, nil)))
	require.NoError(t, err)
	runUntilCounts(t, q, 1, 1, 30*time.Second, w)

	e, err := q.Effect(ctx, first)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, e.State)
	require.Equal(t, 1, e.Attempts)
	require.Contains(t, e.LastError, "lease expired")
	require.Equal(t, 1, countEvents(t, s, effects.TypeStarted, first), "not claimed again")
	require.Zero(t, l.runs[first])
	require.Equal(t, 1, l.completed[second])
	st := w.Stats()
	require.Equal(t, int64(1), st.Failed)
	require.Equal(t, int64(1), st.LeaseTakeovers)
}

// TestPanickingHandlerFailsTheAttempt: a panic is recorded as the attempt's
// error; the worker keeps running.
func TestPanickingHandlerFailsTheAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, q, id := oneEffect(t, nil)
	w, err := effects.NewWorker(s, &effects.Config{MaxAttempts: 1, PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"job": func(context.Context, effects.Effect) error { panic("kaboom") }}})
	require.NoError(t, err)
	runUntilCounts(t, q, 0, 1, 30*time.Second, w)
	e, err := q.Effect(ctx, id)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, e.State)
	require.Equal(t, `pgdcb: effects: handler for "job" panicked: kaboom`, e.LastError)
}

// TestLeaseIsExtendedWhileTheHandlerRuns: a handler running for several
// leases keeps its effect; the other worker, looking every 50 ms, never takes
// it over, and the effect has one attempt. The handler returns once its
// worker has extended the lease 4 times and the claim's own lease ended a
// lease ago (2 leases after the claim), or at once when a worker took the
// effect over: signals, not a fixed time. The lease is 1 s, so that an
// extension has 667 ms to commit on a loaded machine before the lease it
// extends ends.
func TestLeaseIsExtendedWhileTheHandlerRuns(t *testing.T) {
	ctx := context.Background()
	s, q, id := oneEffect(t, json.RawMessage(`{"seq":0}`))
	l := newLedger()
	h := l.handler(0, nil)
	const lease = time.Second
	var ws []*effects.Worker // set before the workers start
	slowH := func(ctx context.Context, e effects.Effect) error {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			st := totalStats(ws)
			if st.LeaseTakeovers > 0 || st.LeaseExtensions >= 4 && !time.Now().Before(e.LeaseUntil.Add(lease)) {
				break // a takeover fails the test below
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-tick.C:
			}
		}
		return h(ctx, e)
	}
	ws = newWorkers(t, s, 2, &effects.Config{Lease: lease, PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"job": slowH}})
	runUntilCounts(t, q, 1, 0, 30*time.Second, ws...)
	total := totalStats(ws)
	require.Zero(t, total.LeaseTakeovers, "%+v", total)
	require.Zero(t, total.Retried, "%+v", total)
	require.Zero(t, total.LostLeases, "%+v", total)
	require.Equal(t, int64(1), total.Claims, "%+v", total)
	require.GreaterOrEqual(t, total.LeaseExtensions, int64(4), "%+v", total)
	e, err := q.Effect(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, e.Attempts)
	require.Equal(t, 1, l.runs[id])
	require.Equal(t, 1, countEvents(t, s, effects.TypeStarted, id))
	require.Zero(t, countEvents(t, s, effects.TypeFailed, id))
}

// lateExtension is a Tracer that holds the first append of
// effect_lease_extended until the lease_until it asks for has passed: the
// extension commits after the lease it extends ended (a store slower than
// the lease). late is closed when it lets that append go.
type lateExtension struct {
	appendStartTracer
	once sync.Once
	late chan struct{}
}

func (l *lateExtension) TraceAppendStart(ctx context.Context, d eventstore.TraceAppendStartData) context.Context {
	if len(d.Events) == 1 && d.Events[0].Type == effects.TypeLeaseExtended {
		l.once.Do(func() {
			var data struct {
				LeaseUntil time.Time `json:"lease_until"`
			}
			if err := json.Unmarshal(d.Events[0].Data, &data); err != nil {
				panic(err)
			}
			<-time.After(time.Until(data.LeaseUntil) + 50*time.Millisecond)
			close(l.late)
		})
	}
	return ctx
}

// TestLateExtensionKeepsTheLease: an extension that commits only after the
// lease it extends has ended, with no other worker's claim in between, keeps
// the lease: the worker does not end its own handler, which returns after the
// next extension, and its success is recorded as the effect's only attempt.
func TestLateExtensionKeepsTheLease(t *testing.T) {
	ctx := context.Background()
	s, q, id := oneEffect(t, json.RawMessage(`{"seq":0}`))
	tr := &lateExtension{late: make(chan struct{})}
	traced, err := eventstore.New(s.Pool(), &eventstore.Config{Schema: s.Schema(), Tracer: tr})
	require.NoError(t, err)
	l := newLedger()
	h := l.handler(0, nil)
	var w *effects.Worker // set before it runs
	var causes []error
	slowH := func(ctx context.Context, e effects.Effect) error {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for w.Stats().LeaseExtensions < 2 { // the late one and the next
			select {
			case <-ctx.Done():
				causes = append(causes, context.Cause(ctx))
				return context.Cause(ctx)
			case <-tick.C:
			}
		}
		return h(ctx, e)
	}
	w, err = effects.NewWorker(traced, &effects.Config{Lease: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"job": slowH}})
	require.NoError(t, err)
	runUntilCounts(t, q, 1, 0, 30*time.Second, w)
	select {
	case <-tr.late:
	default:
		t.Fatal("no extension was held past its lease")
	}
	require.Empty(t, causes, "the handler's context ended")
	st := w.Stats()
	require.Equal(t, int64(1), st.Claims, "%+v", st)
	require.Equal(t, int64(1), st.Executed, "%+v", st)
	require.Zero(t, st.Retried, "%+v", st)
	e, err := q.Effect(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, e.Attempts)
	require.Equal(t, 1, l.runs[id])
	require.Zero(t, countEvents(t, s, effects.TypeFailed, id))
}

// failExtensions is a Tracer that makes every append of
// effect_lease_extended fail (it cancels the append's context), as a store
// that cannot be reached.
type failExtensions struct{ appendStartTracer }

func (failExtensions) TraceAppendStart(ctx context.Context, d eventstore.TraceAppendStartData) context.Context {
	if len(d.Events) == 1 && d.Events[0].Type == effects.TypeLeaseExtended {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c
	}
	return ctx
}

// TestHandlerEndsWhenTheLeaseCannotBeExtended: when every extension fails
// until the lease ends, the worker ends the handler's context with the cause
// "lease lost ... could not be extended", and records the attempt's failure
// with that error (here the last attempt: failed for good); nothing counts a
// takeover or a lost lease, since no other worker claimed the effect.
func TestHandlerEndsWhenTheLeaseCannotBeExtended(t *testing.T) {
	ctx := context.Background()
	s, q, id := oneEffect(t, nil)
	traced, err := eventstore.New(s.Pool(), &eventstore.Config{Schema: s.Schema(), Tracer: failExtensions{}})
	require.NoError(t, err)
	w, err := effects.NewWorker(traced, &effects.Config{MaxAttempts: 1, Lease: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"job": func(ctx context.Context, _ effects.Effect) error {
			<-ctx.Done()
			return context.Cause(ctx)
		}}})
	require.NoError(t, err)
	runUntilCounts(t, q, 0, 1, 30*time.Second, w)
	e, err := q.Effect(ctx, id)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, e.State)
	require.Equal(t, 1, e.Attempts)
	require.Equal(t, "pgdcb: effects: lease lost while the handler ran: it could not be extended before it ended", e.LastError)
	require.Zero(t, countEvents(t, s, effects.TypeLeaseExtended, id))
	st := w.Stats()
	require.Equal(t, int64(1), st.Failed, "%+v", st)
	require.Zero(t, st.LeaseTakeovers, "%+v", st)
	require.Zero(t, st.LostLeases, "%+v", st)
}
