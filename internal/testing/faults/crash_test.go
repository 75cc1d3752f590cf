package faults_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Scenario 1. Eight writers (Append of 1 event, Append of 100, AppendIf on
// distinct boundaries and on one contended counter) run while the server is
// crashed twice (immediate shutdown, down for 300 ms, started again: crash
// recovery) and for a while after each start.
//
// For 150 ms before each crash, commits wait after their WAL is written for
// a synchronous standby that does not exist, as they would for a standby or
// a slow disk: the crash then finds commits that are durable but not
// acknowledged, whose callers get a connection error. Without that window
// (fsync is off here) it is a few microseconds wide and a crash seldom hits
// it.
func TestCrashUnderWriters(t *testing.T) {
	s := cluster(t)
	began := time.Now()
	e := newEnv(t)
	store := e.store(t, newPool(t, "faults_writer", 8, nil), nil)
	led := &ledger{}
	w := startWriters(store, 8, led)
	defer w.halt()

	var recovery time.Duration
	// The verdicts below need the contended counter to have moved and some
	// writes to have met each crash: waited for in the ledger (a loaded
	// machine may slow the writers down to nothing in a fixed sleep).
	waitUntil(t, "the writers moved the counter", func() bool {
		return led.has(func(a attempt) bool { return a.kind == "appendif-counter" && a.out == acked })
	})
	for round := range 2 {
		holdCommits(t, e)
		// The crash must meet commits that are durable but not acknowledged:
		// wait until a writer's commit waits behind the hold.
		waitUntil(t, fmt.Sprintf("a commit held before crash %d", round), func() bool {
			var n int
			err := e.admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
				WHERE application_name = 'faults_writer' AND wait_event = 'SyncRep'`).Scan(&n)
			require.NoError(t, err)
			return n > 0
		})
		releaseCommitsAtNextStart(t, e)
		settling := store.SettleStats().Settled
		require.NoError(t, s.Crash(t.Context()), "crash %d", round)
		crashed := time.Now()
		// A write met the crash: it failed with a definite error, or the
		// store is settling a call the crash cut off (the writers whose
		// calls were in flight are all settling while the server is down:
		// waiting for a definite error alone could outlast the settle
		// budget and turn their answers into unknowns).
		waitUntil(t, fmt.Sprintf("a write met crash %d", round), func() bool {
			return store.SettleStats().Settled > settling ||
				led.has(func(a attempt) bool { return a.out == definite && a.at.After(crashed) })
		})
		restart := time.Now()
		require.NoError(t, s.Start(t.Context()), "start %d", round)
		require.Eventually(t, func() bool { _, ok := led.ackedAfter(restart); return ok },
			waitTimeout, 5*time.Millisecond, "an append succeeds after start %d", round)
		d, _ := led.ackedAfter(restart)
		recovery = max(recovery, d)
		led.awaitAcked(t, restart, 50) // the writers run between crashes
	}
	w.halt()

	v := verify(t, e, led)
	v.f.Scenario = "1 crash, 8 writers"
	v.f.Recovery = recovery
	v.f.Elapsed = time.Since(began)
	v.f.Settle = store.SettleStats()
	k := requireCounterOrReport(t, e, &v)
	v.f.Note = fmt.Sprintf("counter=%d, failed decision reads=%d; errors: %s", k, w.readFails.Load(), kinds(errorsOf(led.all())))
	record(t, v.f)
	requireClean(t, v)
	require.Positive(t, k, "the contended counter moved")
	require.Positive(t, int64(v.f.Definite)+v.f.Settle.Settled, "some writes met the crash (a definite error, or a settled call)")
	require.Positive(t, v.f.Settle.Present, "the crashes met commits that were durable but not acknowledged, and the store settled them")
	requireUnknownOnlyWhenBudgetRanOut(t, v)
}

// requireUnknownOnlyWhenBudgetRanOut: every unknown outcome a caller saw is
// one whose settle budget ran out (the store counts those); with the
// default budget (5 s) and a server down for well under that, none.
func requireUnknownOnlyWhenBudgetRanOut(t *testing.T, v verdict) {
	t.Helper()
	require.EqualValues(t, v.f.Settle.Unknown, v.f.Unknown, "unknown outcomes not from a settle budget that ran out: %s", v.f.line())
	require.Zero(t, v.f.Unknown, "unknown outcomes although the server came back within the settle budget: %s", v.f.line())
}

// Scenario 1b. The same writers while the server is restarted twice the
// routine way (fast shutdown, `pg_ctl restart -m fast`): every session is
// ended with 57P01, the pool's idle connections are dead. The store settles
// every call that was in flight and sends the absent ones again: no caller
// sees ErrOutcomeUnknown.
func TestRestartUnderWriters(t *testing.T) {
	s := cluster(t)
	began := time.Now()
	e := newEnv(t)
	store := e.store(t, newPool(t, "faults_writer_r", 8, nil), nil)
	led := &ledger{}
	w := startWriters(store, 8, led)
	defer w.halt()

	var recovery time.Duration
	led.awaitAcked(t, began, 50)
	for round := range 2 {
		require.NoError(t, s.Restart(t.Context()), "restart %d", round)
		restart := time.Now()
		require.Eventually(t, func() bool { _, ok := led.ackedAfter(restart); return ok },
			30*time.Second, 5*time.Millisecond, "an append succeeds after restart %d", round)
		d, _ := led.ackedAfter(restart)
		recovery = max(recovery, d)
		led.awaitAcked(t, restart, 40)
	}
	w.halt()

	v := verify(t, e, led)
	v.f.Scenario = "1b restart -m fast"
	v.f.Recovery = recovery
	v.f.Elapsed = time.Since(began)
	v.f.Settle = store.SettleStats()
	k := requireCounterOrReport(t, e, &v)
	v.f.Note = fmt.Sprintf("counter=%d, failed decision reads=%d; errors: %s", k, w.readFails.Load(), kinds(errorsOf(led.all())))
	record(t, v.f)
	requireClean(t, v)
	require.Positive(t, k, "the contended counter moved")
	require.Positive(t, v.f.Settle.Settled, "the restarts met appends in flight")
	requireUnknownOnlyWhenBudgetRanOut(t, v)
}

// requireCounterOrReport checks the counter after the figures are recorded
// whatever it finds, so that a failure still leaves its line in the summary.
func requireCounterOrReport(t *testing.T, e *env, v *verdict) int {
	t.Helper()
	var k int
	ok := t.Run("counter", func(t *testing.T) { k = requireCounter(t, e) })
	if !ok {
		v.problem("the counter has gaps or repeats")
	}
	return k
}

// holdCommits makes every commit wait, once its WAL is written, for a
// synchronous standby that does not exist (until releaseCommits, or a restart
// after releaseCommitsAtNextStart). A held commit is durable: a crash or a
// terminated backend leaves it committed, its caller without an answer.
func holdCommits(t *testing.T, e *env) {
	t.Helper()
	t.Cleanup(func() { releaseCommits(t, e) })
	require.NoError(t, serverExec(t.Context(),
		`ALTER SYSTEM SET synchronous_standby_names = 'faults_no_such_standby'`, `SELECT pg_reload_conf()`))
}

// releaseCommitsAtNextStart removes the setting from the configuration file
// without reloading it: commits stay held until the server restarts.
func releaseCommitsAtNextStart(t *testing.T, e *env) {
	t.Helper()
	require.NoError(t, serverExec(t.Context(), `ALTER SYSTEM RESET synchronous_standby_names`))
}

// releaseCommits lets held commits complete.
func releaseCommits(t *testing.T, e *env) {
	t.Helper()
	if !srv.Running() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, serverExec(ctx, `ALTER SYSTEM RESET synchronous_standby_names`, `SELECT pg_reload_conf()`))
}

// Scenario 2. The same writers while an admin session terminates one of
// their busy backends every 3 ms for 2.5 s. Twice, commits are held for
// 150 ms after their WAL is written (see holdCommits), and the backends
// waiting so are terminated: each has committed, and its caller gets a
// connection error.
func TestTerminateWriters(t *testing.T) {
	cluster(t)
	began := time.Now()
	e := newEnv(t)
	store := e.store(t, newPool(t, "faults_writer_t", 8, nil), nil)
	led := &ledger{}
	w := startWriters(store, 8, led)
	defer w.halt()

	led.awaitAcked(t, began, 20)
	var terminated atomic.Int64
	start := time.Now()
	deadline := start.Add(2500 * time.Millisecond)
	holds := []time.Duration{700 * time.Millisecond, 1700 * time.Millisecond}
	held := time.Time{}
	heldTerminated := 0
	for time.Now().Before(deadline) {
		switch {
		case held.IsZero() && len(holds) > 0 && time.Since(start) >= holds[0]:
			holdCommits(t, e)
			held, holds = time.Now(), holds[1:]
		case !held.IsZero() && time.Since(held) >= 150*time.Millisecond:
			// Terminate every writer whose commit is held, then let the
			// others' commits complete.
			var n int
			err := e.admin.QueryRow(t.Context(), `SELECT count(*) FROM (
				SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = 'faults_writer_t' AND wait_event = 'SyncRep') t`).Scan(&n)
			require.NoError(t, err)
			terminated.Add(int64(n))
			heldTerminated += n
			releaseCommits(t, e)
			held = time.Time{}
		}
		if held.IsZero() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			var n int
			err := e.admin.QueryRow(ctx, `SELECT count(*) FROM (
				SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = 'faults_writer_t' AND state = 'active'
				ORDER BY random() LIMIT 1) t`).Scan(&n)
			cancel()
			require.NoError(t, err)
			terminated.Add(int64(n))
		}
		time.Sleep(3 * time.Millisecond)
	}
	if !held.IsZero() {
		releaseCommits(t, e)
	}
	last := time.Now()
	require.Eventually(t, func() bool { _, ok := led.ackedAfter(last); return ok },
		30*time.Second, 5*time.Millisecond, "appends succeed once the terminations stop")
	recovery, _ := led.ackedAfter(last)
	led.awaitAcked(t, last, 20)
	w.halt()

	v := verify(t, e, led)
	v.f.Scenario = "2 pg_terminate_backend"
	v.f.Recovery = recovery
	v.f.Elapsed = time.Since(began)
	v.f.Settle = store.SettleStats()
	k := requireCounterOrReport(t, e, &v)
	v.f.Note = fmt.Sprintf("backends terminated=%d (%d with a held commit), counter=%d, failed decision reads=%d; errors: %s",
		terminated.Load(), heldTerminated, k, w.readFails.Load(), kinds(errorsOf(led.all())))
	record(t, v.f)
	requireClean(t, v)
	require.Positive(t, terminated.Load(), "backends were terminated")
	require.Positive(t, heldTerminated, "backends were terminated after their commit")
	require.Positive(t, k, "the contended counter moved")
	require.Positive(t, v.f.Settle.Present, "terminated calls that had committed were settled as present")
	require.Zero(t, v.f.Unknown, "the server was up: every terminated call settles")
}
