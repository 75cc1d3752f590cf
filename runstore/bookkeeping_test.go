package runstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/runstore"
)

func ev(seq int64, typ string) runstore.CanonicalEngineEvent {
	return runstore.CanonicalEngineEvent{RunID: "r", RunSeq: seq, EventType: typ, EmittedAt: "2026-11-24T10:00:00Z"}
}

// Observe applies only the next runSeq and names every other case; Fold
// (a replay in runSeq order) records the gaps it skips over.
func TestObserveAndFold(t *testing.T) {
	t.Parallel()
	snap := runstore.NewSnapshot("r")
	require.Equal(t, runstore.ObservedNext, snap.Observe(ev(1, "RunStarted"), nil))
	require.Equal(t, runstore.ObservedHeld, snap.Observe(ev(1, "RunStarted"), nil))
	require.Equal(t, runstore.ObservedGap, snap.Observe(ev(3, "RunCompleted"), nil))
	require.Equal(t, int64(1), snap.LastEventSeq, "a gap changes nothing")
	require.Equal(t, int64(1), snap.EventCount)
	require.Equal(t, runstore.StatusRunning, snap.Status)

	require.True(t, snap.Fold(ev(3, "Tick"), nil))
	require.True(t, snap.Fold(ev(7, "RunCompleted"), nil))
	require.False(t, snap.Fold(ev(7, "RunCompleted"), nil), "at or below LastEventSeq: skipped")
	require.Equal(t, []runstore.SeqRange{{From: 2, To: 2}, {From: 4, To: 6}}, snap.Gaps)
	require.Equal(t, int64(7), snap.LastEventSeq)
	require.Equal(t, int64(3), snap.EventCount)
	require.Equal(t, runstore.StatusCompleted, snap.Status)

	require.Equal(t, runstore.ObservedFill, snap.Observe(ev(5, "Tick"), nil))
	require.Equal(t, runstore.ObservedHeld, snap.Observe(ev(3, "Tick"), nil))
	require.Equal(t, runstore.ObservedNext, snap.Observe(ev(8, "Tick"), nil))
	require.Equal(t, int64(4), snap.EventCount)
	require.Equal(t, "fill", runstore.ObservedFill.String())
}

// The validation helpers are AppendEvent's and FetchEvents'.
func TestValidateHelpers(t *testing.T) {
	t.Parallel()
	e, err := runstore.ValidateEvent(runEvent("r", "k"))
	require.NoError(t, err)
	require.Len(t, e.EventID, 36, "generated")
	bad := runEvent("r", "k")
	bad.EmittedAt = "yesterday"
	_, err = runstore.ValidateEvent(bad)
	var ve *runstore.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "emittedAt", ve.Field)

	o, err := runstore.ValidateFetch("r", nil, runstore.DefaultMaxFetchLimit)
	require.NoError(t, err)
	require.Equal(t, runstore.FetchOptions{Limit: runstore.DefaultFetchLimit}, o)
	_, err = runstore.ValidateFetch("r", &runstore.FetchOptions{Limit: 11}, 10)
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "limit", ve.Field)
	require.ErrorIs(t, runstore.ValidateRunID(""), runstore.ErrInvalidInput)
}

// A writer that keeps losing the race for the run's next runSeq gets
// runstore's own sentinel (and the event store's), nothing written.
func TestAppendEventContention(t *testing.T) {
	t.Parallel()
	a := newStore(t, &runstore.Config{MaxAppendAttempts: 1})
	b, err := runstore.New(a.EventStore(), &runstore.Config{MaxAppendAttempts: 1})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = a.AppendEvent(ctx, runEvent("c", "k1")) // a's hint: runSeq 1
	require.NoError(t, err)
	_, err = b.AppendEvent(ctx, runEvent("c", "k2")) // another process: runSeq 2
	require.NoError(t, err)
	_, err = a.AppendEvent(ctx, runEvent("c", "k3")) // a's hint is stale: one attempt, lost
	require.ErrorIs(t, err, runstore.ErrContention)
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	evs, err := a.FetchEvents(ctx, "c", nil)
	require.NoError(t, err)
	require.Len(t, evs, 2)
}

// A projector: Observe for each new event, and on a non-contiguous
// observation a rebuild with Fold from the run's events.
func TestObserveThenRebuild(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	snap := runstore.NewSnapshot("run-1")
	for _, e := range []runstore.CanonicalEngineEvent{
		{RunID: "run-1", RunSeq: 1, EventType: "RunStarted"},
		{RunID: "run-1", RunSeq: 3, EventType: "StepStarted", StepID: "a"}, // runSeq 2 not visible yet
	} {
		if obs := snap.Observe(e, runstore.DefaultReducer); obs != runstore.ObservedNext {
			fmt.Fprintln(&out, "STALE:", obs)
		}
	}
	// The resync: replay what the run holds now, in runSeq order.
	snap = runstore.NewSnapshot("run-1")
	for _, e := range []runstore.CanonicalEngineEvent{
		{RunID: "run-1", RunSeq: 1, EventType: "RunStarted"},
		{RunID: "run-1", RunSeq: 3, EventType: "StepStarted", StepID: "a"},
	} {
		snap.Fold(e, runstore.DefaultReducer)
	}
	fmt.Fprintln(&out, snap.Status, snap.LastEventSeq, snap.EventCount, snap.Gaps)
	// runSeq 2 commits later: another non-contiguous observation.
	fmt.Fprintln(&out, snap.Observe(runstore.CanonicalEngineEvent{RunID: "run-1", RunSeq: 2, EventType: "Tick"}, nil))
	require.Equal(t, "STALE: gap\nRUNNING 3 2 [{2 2}]\nfill\n", out.String())
}
