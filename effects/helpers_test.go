package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/query"
)

// newStore returns a store in a fresh schema, dropped when the test ends.
func newStore(t testing.TB) *eventstore.Store {
	t.Helper()
	return pgdcbtest.NewStore(t, &pgdcbtest.Options{OwnPool: true})
}

func newQueue(t testing.TB, s *eventstore.Store) *effects.Queue {
	t.Helper()
	q, err := effects.New(s, nil)
	require.NoError(t, err)
	return q
}

// countEvents counts the events of a type tagged effect_id=id.
func countEvents(t testing.TB, s *eventstore.Store, typ, id string) int {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), query.Tagged([]string{typ}, effects.TagID+"="+id), nil)
	require.NoError(t, err)
	return len(evs)
}

// startWorkers runs each worker until the returned stop is called; stop
// waits for them and fails the test on an unexpected error.
func startWorkers(t testing.TB, ws ...*effects.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() { errs <- w.Run(ctx) }()
	}
	return func() {
		cancel()
		for range ws {
			if err := <-errs; err != nil && err != context.Canceled {
				t.Errorf("worker: %v", err)
			}
		}
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	await.Until(t, timeout, func() (bool, string) {
		ok, last := cond()
		return ok, what + ": " + last
	})
}

// runUntilCounts runs the workers until the queue counts completed and
// failed effects, then stops them.
func runUntilCounts(t testing.TB, q *effects.Queue, completed, failed int, timeout time.Duration, ws ...*effects.Worker) {
	t.Helper()
	stop := startWorkers(t, ws...)
	waitCounts(t, q, completed, failed, timeout)
	stop()
}

// waitCounts waits until the queue counts completed and failed effects.
func waitCounts(t testing.TB, q *effects.Queue, completed, failed int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%d completed, %d failed", completed, failed), func() (bool, string) {
		c, err := q.Counts(context.Background())
		require.NoError(t, err)
		return c.Completed == completed && c.Failed == failed, fmt.Sprintf("%+v", c)
	})
}

// requestJob requests an effect of type "job" and returns its id.
func requestJob(t testing.TB, q *effects.Queue, session, dedupeKey string, payload json.RawMessage) string {
	t.Helper()
	id, _, err := q.Request(context.Background(), effects.Request{Type: "job", Session: session, DedupeKey: dedupeKey, Payload: payload})
	require.NoError(t, err)
	return id
}

// oneEffect returns a store in a fresh schema, its queue and the id of one
// effect requested in it: type "job", session "s", dedupe key "k", with
// payload (nil for none).
func oneEffect(t testing.TB, payload json.RawMessage) (*eventstore.Store, *effects.Queue, string) {
	t.Helper()
	s := newStore(t)
	q := newQueue(t, s)
	return s, q, requestJob(t, q, "s", "k", payload)
}

// newWorkers returns n workers over the store with the same configuration
// (each with a Identity of its own, unless cfg sets one).
func newWorkers(t testing.TB, s *eventstore.Store, n int, cfg *effects.Config) []*effects.Worker {
	t.Helper()
	var ws []*effects.Worker
	for range n {
		w, err := effects.NewWorker(s, cfg)
		require.NoError(t, err)
		ws = append(ws, w)
	}
	return ws
}

// startVictim runs a worker configured by cfg whose handler blocks until the
// worker is killed, and returns once the handler runs, with the id of the
// effect it runs. kill stops the worker (its handler then fails, unrecorded,
// as when a worker dies) and waits until Run has returned context.Canceled.
func startVictim(t testing.TB, s *eventstore.Store, cfg func(effects.Handler) *effects.Config) (victim *effects.Worker, effectID string, kill func()) {
	t.Helper()
	inHandler := make(chan string, 1)
	victim, err := effects.NewWorker(s, cfg(func(ctx context.Context, e effects.Effect) error {
		select {
		case inHandler <- e.ID:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}))
	require.NoError(t, err)
	vctx, cancel := context.WithCancel(context.Background())
	verr := make(chan error, 1)
	go func() { verr <- victim.Run(vctx) }()
	select {
	case effectID = <-inHandler:
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the victim never ran an effect")
	}
	return victim, effectID, func() {
		t.Helper()
		cancel()
		require.ErrorIs(t, <-verr, context.Canceled)
	}
}

// startSlow runs a worker with a 300ms lease and handler h on a store over
// s's pool and schema that traces its appends with tr, so that tr can hold
// them; stop stops it.
func startSlow(t testing.TB, s *eventstore.Store, tr *blockAppends, h effects.Handler) (slow *effects.Worker, stop func()) {
	t.Helper()
	traced, err := eventstore.New(s.Pool(), &eventstore.Config{Schema: s.Schema(), Tracer: tr})
	require.NoError(t, err)
	slow, err = effects.NewWorker(traced, &effects.Config{Lease: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"job": h}})
	require.NoError(t, err)
	return slow, startWorkers(t, slow)
}

// takeOver runs a second worker with l's handler while slow (started by
// startSlow, and stuck in its handler or in an append tr holds) has the only
// effect of q: once that worker has taken the effect over and completed it,
// it releases tr and waits until slow gave up its result, stops both workers
// and returns the second one.
func takeOver(t testing.TB, s *eventstore.Store, q *effects.Queue, l *ledger, tr *blockAppends, slow *effects.Worker, stopSlow func()) (fast *effects.Worker) {
	t.Helper()
	fast, err := effects.NewWorker(s, &effects.Config{PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"job": l.handler(0, nil)}})
	require.NoError(t, err)
	stopFast := startWorkers(t, fast)
	waitCounts(t, q, 1, 0, 30*time.Second)
	close(tr.release)
	waitFor(t, 30*time.Second, "the slow worker gave up its result", func() (bool, string) {
		st := slow.Stats()
		return st.LostLeases == 1, fmt.Sprintf("%+v", st)
	})
	stopSlow()
	stopFast()
	return fast
}
