package effects_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgtest"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// newStore returns a store in a fresh schema, dropped when the test ends.
func newStore(t testing.TB) *eventstore.Store {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	_, err := pgdcbsql.Migrate(context.Background(), pool, schema)
	require.NoError(t, err)
	s, err := eventstore.New(pool, &eventstore.Config{Schema: schema, GroupCommitDisabled: pgtest.GroupCommitDisabled()})
	require.NoError(t, err)
	return s
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
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s (last: %s)", timeout, what, last)
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
