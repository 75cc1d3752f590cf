package conformance_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore/conformance"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/memstore"
)

// failing runs every check on a fresh store from newStore with a recorder
// and returns the names of the checks that failed.
func failing(t *testing.T, newStore func() pgdcb.Store) []string {
	var failed []string
	for _, c := range conformance.Checks(&conformance.Options{Rounds: 5}) {
		failures := (&pgtest.Recorder{TB: t}).Run(func(tb testing.TB) { c.Run(tb, newStore()) })
		if len(failures) > 0 {
			failed = append(failed, c.Name)
			t.Logf("%s failed as it should: %s", c.Name, failures[0])
		}
	}
	return failed
}

// skipsCondition is broken on purpose: it appends without checking
// FailIfEventsMatch (a store that forgot the check, or lost its lock).
type skipsCondition struct{ *memstore.Store }

func (s skipsCondition) AppendIf(ctx context.Context, events []pgdcb.Event, cond appendif.Condition) (pgdcb.AppendResult, error) {
	if cond.Idempotency.IsEmpty() {
		return s.Append(ctx, events)
	}
	return s.Store.AppendIf(ctx, events, appendif.Condition{Idempotency: cond.Idempotency})
}

// ignoresIdempotency is broken on purpose: it drops the idempotency query.
type ignoresIdempotency struct{ *memstore.Store }

func (s ignoresIdempotency) AppendIf(ctx context.Context, events []pgdcb.Event, cond appendif.Condition) (pgdcb.AppendResult, error) {
	if cond.FailIfEventsMatch.IsEmpty() {
		return s.Append(ctx, events)
	}
	return s.Store.AppendIf(ctx, events, appendif.FailIf(cond.FailIfEventsMatch, cond.After))
}

// keepsKeys is broken on purpose: its Erase appends the erasure event but
// destroys no key.
type keepsKeys struct{ *memstore.Store }

func (s keepsKeys) Erase(ctx context.Context, subject string) (pgdcb.AppendResult, error) {
	return s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent(pgdcb.ErasedEventType, map[string]string{"subject": subject}, "pgdcb.subject="+subject)})
}

func TestBrokenStoresFailTheSuite(t *testing.T) {
	t.Parallel()
	require.Empty(t, failing(t, func() pgdcb.Store { return memstore.MustNew(nil) }),
		"the recorder must not fail a correct store")

	failed := failing(t, func() pgdcb.Store { return skipsCondition{memstore.MustNew(nil)} })
	for _, want := range []string{"ConditionUnseenEventFails", "ConditionItemsAreORed", "LimitedReadCursorConflicts",
		"ProjectUnionAndDispatch", "RaceExactlyOneWinner", "RaceOverlappingConditions", "RaceMultiItemCondition",
		"RaceMixedWriters", "TailCursorAsCondition"} {
		require.True(t, slices.Contains(failed, want), "a store that skips the condition must fail %s (failed: %v)", want, failed)
	}
	require.NotContains(t, failed, "RaceIdempotency")

	failed = failing(t, func() pgdcb.Store { return ignoresIdempotency{memstore.MustNew(nil)} })
	for _, want := range []string{"IdempotencyQuery", "RaceIdempotency"} {
		require.True(t, slices.Contains(failed, want), "a store that ignores idempotency must fail %s (failed: %v)", want, failed)
	}
	require.NotContains(t, failed, "RaceExactlyOneWinner")

	failed = failing(t, func() pgdcb.Store { return keepsKeys{memstore.MustNew(nil)} })
	require.Equal(t, []string{"ErasureRedactsOnlyTheSubject"}, failed, "a store whose Erase keeps the key")
}
