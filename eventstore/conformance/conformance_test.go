package conformance_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/eventstore/conformance"
	"github.com/pgdcb/pgdcb/memstore"
)

// recorder is a testing.TB that records failures instead of reporting them:
// Fatal and FailNow end the check's goroutine with runtime.Goexit, as
// testing.T does. Everything else goes to the real test.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
}

func (r *recorder) Fail()                     { r.record("Fail") }
func (r *recorder) Error(args ...any)         { r.record(fmt.Sprint(args...)) }
func (r *recorder) Errorf(f string, a ...any) { r.record(fmt.Sprintf(f, a...)) }
func (r *recorder) FailNow()                  { r.record("FailNow"); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)         { r.record(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(f string, a ...any) { r.record(fmt.Sprintf(f, a...)); runtime.Goexit() }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

// failing runs every check on a fresh store from newStore with a recorder
// and returns the names of the checks that failed.
func failing(t *testing.T, newStore func() eventstore.Interface) []string {
	var failed []string
	for _, c := range conformance.Checks(&conformance.Options{Rounds: 5}) {
		rec := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Run(rec, newStore())
		}()
		<-done
		if rec.Failed() {
			failed = append(failed, c.Name)
			t.Logf("%s failed as it should: %s", c.Name, rec.failures[0])
		}
	}
	return failed
}

// skipsCondition is broken on purpose: it appends without checking
// FailIfEventsMatch (a store that forgot the check, or lost its lock).
type skipsCondition struct{ *memstore.Store }

func (s skipsCondition) AppendIf(ctx context.Context, events []eventstore.Event, cond appendif.Condition) (eventstore.AppendResult, error) {
	if cond.Idempotency.IsEmpty() {
		return s.Append(ctx, events)
	}
	return s.Store.AppendIf(ctx, events, appendif.Condition{Idempotency: cond.Idempotency})
}

// ignoresIdempotency is broken on purpose: it drops the idempotency query.
type ignoresIdempotency struct{ *memstore.Store }

func (s ignoresIdempotency) AppendIf(ctx context.Context, events []eventstore.Event, cond appendif.Condition) (eventstore.AppendResult, error) {
	if cond.FailIfEventsMatch.IsEmpty() {
		return s.Append(ctx, events)
	}
	return s.Store.AppendIf(ctx, events, appendif.FailIf(cond.FailIfEventsMatch, cond.After))
}

func TestBrokenStoresFailTheSuite(t *testing.T) {
	t.Parallel()
	require.Empty(t, failing(t, func() eventstore.Interface { return memstore.MustNew(nil) }),
		"the recorder must not fail a correct store")

	failed := failing(t, func() eventstore.Interface { return skipsCondition{memstore.MustNew(nil)} })
	for _, want := range []string{"ConditionUnseenEventFails", "ConditionItemsAreORed", "LimitedReadCursorConflicts",
		"ProjectUnionAndDispatch", "RaceExactlyOneWinner", "RaceOverlappingConditions", "RaceMultiItemCondition",
		"RaceMixedWriters", "TailCursorAsCondition"} {
		require.True(t, slices.Contains(failed, want), "a store that skips the condition must fail %s (failed: %v)", want, failed)
	}
	require.NotContains(t, failed, "RaceIdempotency")

	failed = failing(t, func() eventstore.Interface { return ignoresIdempotency{memstore.MustNew(nil)} })
	for _, want := range []string{"IdempotencyQuery", "RaceIdempotency"} {
		require.True(t, slices.Contains(failed, want), "a store that ignores idempotency must fail %s (failed: %v)", want, failed)
	}
	require.NotContains(t, failed, "RaceExactlyOneWinner")
}
