// Package conformance is the State Store contract's test suite: any
// runstore.StateStore implementation runs it from its own tests with
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) runstore.StateStore { return newStore(t) })
//	}
//
// newStore is called once per subtest and should return an empty store (or
// at least one where run ids made by the suite are unused: the suite makes
// random run ids). The suite checks the contract's invariants: runSeq
// strictly increasing and unique per run, idempotency (also under 16 racing
// duplicates), watermark reads that never see a gap filled later, fetch order
// and paging, typed errors with nothing written for bad input, the default
// reducer, GetSnapshot = ProjectSnapshot once caught up (when the store
// has CatchUp(ctx) error, as *runstore.Store has; otherwise it polls
// GetSnapshot), and retention and archival when it has DeleteRun and
// ExportRun, as *runstore.Store has.
//
// A backend that may show gaps in a run's runSeqs that fill later (one
// without locks or enforced unique keys) sets Options.MayShowGaps: the
// watermark test then reads as the contract's reader does (§4.2: a
// non-contiguous observation makes it STALE and it refetches what it missed)
// instead of requiring that no gap is ever seen. Options.WriteAt lets the
// suite open a gap and fill it, and require the materialised snapshots to
// follow (STALE, resync, resume).
package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/runstore"
)

// syncer is a store whose materialised snapshots can be brought up to date
// on request: CatchUp returns once every event committed before the call is
// reflected in GetSnapshot.
type syncer interface {
	CatchUp(ctx context.Context) error
}

// retainer is a store with retention and archival: DeleteRun deletes a whole
// run (events and snapshot) and returns how many events it deleted; ExportRun
// writes the run's events, in runSeq order, as JSON lines (one
// CanonicalEngineEvent per line) and returns how many it wrote.
type retainer interface {
	DeleteRun(ctx context.Context, runID string) (int64, error)
	ExportRun(ctx context.Context, runID string, w io.Writer) (int64, error)
}

// Options tune the suite; nil means defaults.
type Options struct {
	// Rounds is how many times each concurrency test repeats. Default 3.
	Rounds int
	// Writers is the number of concurrent writers on one run. Default 16.
	Writers int
	// EventsPerWriter in the watermark test. Default 10.
	EventsPerWriter int
	// SnapshotTimeout bounds the wait for GetSnapshot to catch up when the
	// store has no CatchUp method. Default 10s.
	SnapshotTimeout time.Duration
	// MayShowGaps: the store may show gaps in a run's runSeqs that fill later
	// (seed 002's backend). WatermarkNoGapFilledLater then follows the run as
	// the contract's reader (§4.2): a page that does not continue at
	// watermark+1 leaves holes, the reader is STALE while it has any and
	// refetches them on every read (the resync); at the end it must have seen
	// every event. Without it, the reader never refetches, so a gap filled
	// behind its watermark fails the test. Default false.
	MayShowGaps bool
	// WriteAt writes ev (a valid event) with ev.RunSeq as given, around the
	// store's append authority, as a writer that took a runSeq and commits
	// late would. When set, the Resync test opens a gap in a run, then fills
	// it, and requires GetSnapshot to equal ProjectSnapshot after each (the
	// projector marks the run STALE and rebuilds it, §4.2). nil: that test
	// is skipped.
	WriteAt func(t *testing.T, s runstore.StateStore, ev runstore.CanonicalEngineEvent)
}

// Run runs the suite with default options.
func Run(t *testing.T, newStore func(t *testing.T) runstore.StateStore) {
	RunWithOptions(t, newStore, nil)
}

// RunWithOptions runs the suite.
func RunWithOptions(t *testing.T, newStore func(t *testing.T) runstore.StateStore, opts *Options) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if o.Writers <= 0 {
		o.Writers = 16
	}
	if o.EventsPerWriter <= 0 {
		o.EventsPerWriter = 10
	}
	if o.SnapshotTimeout <= 0 {
		o.SnapshotTimeout = 10 * time.Second
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s runstore.StateStore, o Options)
	}{
		{"AppendAndFetch", testAppendAndFetch},
		{"IdempotentDuplicate", testIdempotentDuplicate},
		{"RacingDuplicates", testRacingDuplicates},
		{"KeyScopedToRun", testKeyScopedToRun},
		{"FetchPaging", testFetchPaging},
		{"WatermarkNoGapFilledLater", testWatermark},
		{"BadInput", testBadInput},
		{"IdempotencyKeyHelper", testKeyHelper},
		{"DefaultReducer", testDefaultReducer},
		{"SnapshotsAgree", testSnapshotsAgree},
		{"Resync", testResync},
		{"Retention", testRetention},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t), o) })
	}
}

func newRunID(t testing.TB) string {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "run-" + hex.EncodeToString(b)
}

// Event returns a valid event of the run with the given type and key; tests
// of other implementations may use it too.
func Event(runID, eventType, key string) runstore.CanonicalEngineEvent {
	return runstore.CanonicalEngineEvent{
		RunID:          runID,
		EventID:        uuid.NewString(),
		EventType:      eventType,
		EventData:      json.RawMessage(`{"k":"` + key + `"}`),
		IdempotencyKey: key,
		EmittedAt:      time.Now().UTC().Format(time.RFC3339Nano),
	}
}

func fetchAll(t testing.TB, s runstore.StateStore, runID string) []runstore.CanonicalEngineEvent {
	t.Helper()
	var out []runstore.CanonicalEngineEvent
	var after int64
	for {
		evs, err := s.FetchEvents(t.Context(), runID, &runstore.FetchOptions{AfterSeq: after, Limit: 100})
		require.NoError(t, err)
		out = append(out, evs...)
		if len(evs) < 100 {
			return out
		}
		after = evs[len(evs)-1].RunSeq
	}
}

func requireStrictlyIncreasing(t testing.TB, evs []runstore.CanonicalEngineEvent) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		require.Greater(t, evs[i].RunSeq, evs[i-1].RunSeq, "runSeq must strictly increase (index %d)", i)
	}
}

func testAppendAndFetch(t *testing.T, s runstore.StateStore, _ Options) {
	ctx := t.Context()
	runID := newRunID(t)
	in := []runstore.CanonicalEngineEvent{}
	var last int64
	for i := range 5 {
		ev := Event(runID, "StepCompleted", fmt.Sprintf("k%d", i))
		ev.StepID = fmt.Sprintf("step-%d", i)
		ev.EngineAttemptID = "e1"
		ev.LogicalAttemptID = "l1"
		ev.AdapterVersion = "test/1"
		ev.EngineRunRef = json.RawMessage(`{"workflowId":"wf-1"}`)
		ev.CausedBySignalID = uuid.NewString()
		ev.ParentEventID = uuid.NewString()
		res, err := s.AppendEvent(ctx, ev)
		require.NoError(t, err)
		require.True(t, res.Persisted)
		require.False(t, res.Idempotent)
		require.Greater(t, res.RunSeq, last)
		last = res.RunSeq
		ev.RunSeq = res.RunSeq
		in = append(in, ev)
	}
	got, err := s.FetchEvents(ctx, runID, nil)
	require.NoError(t, err)
	require.Len(t, got, len(in))
	for i, g := range got {
		w := in[i]
		require.Equal(t, w.RunSeq, g.RunSeq)
		require.Equal(t, w.RunID, g.RunID)
		require.Equal(t, w.EventID, g.EventID)
		require.Equal(t, w.StepID, g.StepID)
		require.Equal(t, w.EngineAttemptID, g.EngineAttemptID)
		require.Equal(t, w.LogicalAttemptID, g.LogicalAttemptID)
		require.Equal(t, w.EventType, g.EventType)
		require.JSONEq(t, string(w.EventData), string(g.EventData))
		require.Equal(t, w.IdempotencyKey, g.IdempotencyKey)
		require.Equal(t, w.AdapterVersion, g.AdapterVersion)
		require.JSONEq(t, string(w.EngineRunRef), string(g.EngineRunRef))
		require.Equal(t, w.CausedBySignalID, g.CausedBySignalID)
		require.Equal(t, w.ParentEventID, g.ParentEventID)
		we, err := time.Parse(time.RFC3339Nano, w.EmittedAt)
		require.NoError(t, err)
		ge, err := time.Parse(time.RFC3339Nano, g.EmittedAt)
		require.NoError(t, err)
		require.True(t, we.Equal(ge), "emittedAt %s != %s", w.EmittedAt, g.EmittedAt)
		_, err = time.Parse(time.RFC3339Nano, g.PersistedAt)
		require.NoError(t, err, "persistedAt must be set by the store, ISO 8601")
	}
	// An unknown run has no events.
	none, err := s.FetchEvents(ctx, newRunID(t), nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

func testIdempotentDuplicate(t *testing.T, s runstore.StateStore, _ Options) {
	ctx := t.Context()
	runID := newRunID(t)
	_, err := s.AppendEvent(ctx, Event(runID, "RunStarted", "a"))
	require.NoError(t, err)
	first, err := s.AppendEvent(ctx, Event(runID, "StepCompleted", "abc123"))
	require.NoError(t, err)
	require.Equal(t, runstore.AppendResult{RunSeq: first.RunSeq, Persisted: true}, first)
	for range 3 {
		dup := Event(runID, "StepCompleted", "abc123") // a retry: new eventId, same key
		again, err := s.AppendEvent(ctx, dup)
		require.NoError(t, err, "a duplicate is never an error")
		require.Equal(t, runstore.AppendResult{RunSeq: first.RunSeq, Idempotent: true, Persisted: false}, again)
	}
	evs := fetchAll(t, s, runID)
	require.Len(t, evs, 2)
	next, err := s.AppendEvent(ctx, Event(runID, "StepCompleted", "def"))
	require.NoError(t, err)
	require.Greater(t, next.RunSeq, first.RunSeq)
}

func testRacingDuplicates(t *testing.T, s runstore.StateStore, o Options) {
	ctx := t.Context()
	for round := range o.Rounds {
		runID := newRunID(t)
		if round%2 == 1 { // a run with history, and one without
			_, err := s.AppendEvent(ctx, Event(runID, "RunStarted", "start"))
			require.NoError(t, err)
		}
		results := make([]runstore.AppendResult, o.Writers)
		errs := make([]error, o.Writers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range o.Writers {
			wg.Go(func() {
				<-start
				results[i], errs[i] = s.AppendEvent(ctx, Event(runID, "StepCompleted", "same-key"))
			})
		}
		close(start)
		wg.Wait()
		persisted := 0
		for i := range o.Writers {
			require.NoError(t, errs[i], "writer %d", i)
			require.Equal(t, results[0].RunSeq, results[i].RunSeq, "every duplicate gets the same runSeq")
			require.NotEqual(t, results[i].Persisted, results[i].Idempotent)
			if results[i].Persisted {
				persisted++
			}
		}
		require.Equal(t, 1, persisted, "round %d: exactly one of %d racing duplicates is persisted", round, o.Writers)
		n := 0
		for _, ev := range fetchAll(t, s, runID) {
			if ev.IdempotencyKey == "same-key" {
				n++
				require.Equal(t, results[0].RunSeq, ev.RunSeq)
			}
		}
		require.Equal(t, 1, n)
	}
}

func testKeyScopedToRun(t *testing.T, s runstore.StateStore, _ Options) {
	ctx := t.Context()
	a, b := newRunID(t), newRunID(t)
	ra, err := s.AppendEvent(ctx, Event(a, "StepCompleted", "k"))
	require.NoError(t, err)
	rb, err := s.AppendEvent(ctx, Event(b, "StepCompleted", "k"))
	require.NoError(t, err)
	require.True(t, ra.Persisted)
	require.True(t, rb.Persisted, "(runId, idempotencyKey) is the unique pair, not the key alone")
}

func testFetchPaging(t *testing.T, s runstore.StateStore, _ Options) {
	ctx := t.Context()
	runID := newRunID(t)
	var seqs []int64
	for i := range 23 {
		r, err := s.AppendEvent(ctx, Event(runID, "Tick", fmt.Sprintf("k%d", i)))
		require.NoError(t, err)
		seqs = append(seqs, r.RunSeq)
	}
	var got []int64
	after := int64(0)
	for {
		evs, err := s.FetchEvents(ctx, runID, &runstore.FetchOptions{AfterSeq: after, Limit: 5})
		require.NoError(t, err)
		require.LessOrEqual(t, len(evs), 5)
		requireStrictlyIncreasing(t, evs)
		for _, ev := range evs {
			require.Greater(t, ev.RunSeq, after)
			got = append(got, ev.RunSeq)
		}
		if len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].RunSeq
	}
	require.Equal(t, seqs, got)
	mid, err := s.FetchEvents(ctx, runID, &runstore.FetchOptions{AfterSeq: seqs[10], Limit: 3})
	require.NoError(t, err)
	require.Len(t, mid, 3)
	require.Equal(t, seqs[11], mid[0].RunSeq)
	all, err := s.FetchEvents(ctx, runID, nil)
	require.NoError(t, err)
	require.Len(t, all, 23)
}

// testWatermark: writers race on one run while a reader follows it with a
// watermark. Every page must continue strictly after the previous one and,
// at the end, the reader must have seen every event: an event that appeared
// behind the watermark (a gap filled later) would be missing.
func testWatermark(t *testing.T, s runstore.StateStore, o Options) {
	ctx := t.Context()
	for round := range o.Rounds {
		runID := newRunID(t)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			errs    []error
			written = map[int64]string{}
		)
		done := make(chan struct{})
		for w := range o.Writers {
			wg.Go(func() {
				for i := range o.EventsPerWriter {
					key := fmt.Sprintf("w%d-%d", w, i)
					r, err := s.AppendEvent(ctx, Event(runID, "Tick", key))
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else if prev, dup := written[r.RunSeq]; dup {
						errs = append(errs, fmt.Errorf("runSeq %d given to %s and %s", r.RunSeq, prev, key))
					} else {
						written[r.RunSeq] = key
					}
					mu.Unlock()
				}
			})
		}
		go func() { wg.Wait(); close(done) }()

		rd := &reader{s: s, runID: runID, mayGap: o.MayShowGaps, seen: map[int64]bool{}}
		pages := 0
		finished := false
		for !finished {
			select {
			case <-done:
				finished = true // one more read after the writers are done
			default:
			}
			n := rd.read(t, round)
			if n > 0 {
				pages++
				finished = false // drain before the final check
			}
		}
		seen := rd.seen
		require.Empty(t, errs)
		total := o.Writers * o.EventsPerWriter
		require.Len(t, written, total)
		all := fetchAll(t, s, runID)
		require.Len(t, all, total)
		requireStrictlyIncreasing(t, all)
		for _, ev := range all {
			require.True(t, seen[ev.RunSeq], "round %d: the watermark reader never saw runSeq %d: a gap was filled behind it", round, ev.RunSeq)
			require.Equal(t, written[ev.RunSeq], ev.IdempotencyKey)
		}
		t.Logf("round %d: %d events, reader read %d non-empty pages, was STALE %d times", round, total, pages, rd.stale)
	}
}

// reader follows a run with a watermark (§4.1). mayGap: as the contract's
// reader of a store that may show gaps (§4.2): a page that does not continue
// at watermark+1 leaves holes below the watermark; while any remain the
// reader is STALE and refetches from the lowest (the resync), and it resumes
// once none remain.
type reader struct {
	s         runstore.StateStore
	runID     string
	mayGap    bool
	watermark int64
	seen      map[int64]bool
	holes     map[int64]bool
	stale     int
}

// read reads once (resyncing first when STALE) and returns how many new
// events it saw.
func (r *reader) read(t *testing.T, round int) int {
	ctx := t.Context()
	n := 0
	if len(r.holes) > 0 {
		r.stale++
		lowest := r.watermark
		for h := range r.holes {
			lowest = min(lowest, h)
		}
		after := lowest - 1
		for after < r.watermark {
			evs, err := r.s.FetchEvents(ctx, r.runID, &runstore.FetchOptions{AfterSeq: after, Limit: 7})
			require.NoError(t, err)
			if len(evs) == 0 {
				break
			}
			for _, ev := range evs {
				if ev.RunSeq <= r.watermark && !r.seen[ev.RunSeq] {
					require.True(t, r.holes[ev.RunSeq], "round %d: resync: runSeq %d was neither seen nor a hole", round, ev.RunSeq)
					delete(r.holes, ev.RunSeq)
					r.seen[ev.RunSeq] = true
					n++
				}
				after = ev.RunSeq
			}
		}
	}
	evs, err := r.s.FetchEvents(ctx, r.runID, &runstore.FetchOptions{AfterSeq: r.watermark, Limit: 7})
	require.NoError(t, err)
	for _, ev := range evs {
		require.Greater(t, ev.RunSeq, r.watermark, "round %d: page must continue strictly after the watermark", round)
		require.False(t, r.seen[ev.RunSeq])
		if r.mayGap {
			for h := r.watermark + 1; h < ev.RunSeq; h++ {
				if r.holes == nil {
					r.holes = map[int64]bool{}
				}
				r.holes[h] = true // non-contiguous: STALE until refetched
			}
		}
		r.seen[ev.RunSeq] = true
		r.watermark = ev.RunSeq
		n++
	}
	return n
}

func testBadInput(t *testing.T, s runstore.StateStore, _ Options) {
	ctx := t.Context()
	runID := newRunID(t)
	cases := []struct {
		field string
		edit  func(*runstore.CanonicalEngineEvent)
	}{
		{"runId", func(e *runstore.CanonicalEngineEvent) { e.RunID = "" }},
		{"eventType", func(e *runstore.CanonicalEngineEvent) { e.EventType = "" }},
		{"idempotencyKey", func(e *runstore.CanonicalEngineEvent) { e.IdempotencyKey = "" }},
		{"eventId", func(e *runstore.CanonicalEngineEvent) { e.EventID = "not-a-uuid" }},
		{"causedBySignalId", func(e *runstore.CanonicalEngineEvent) { e.CausedBySignalID = "123" }},
		{"parentEventId", func(e *runstore.CanonicalEngineEvent) { e.ParentEventID = "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz" }},
		{"eventData", func(e *runstore.CanonicalEngineEvent) { e.EventData = json.RawMessage(`{"a":`) }},
		{"engineRunRef", func(e *runstore.CanonicalEngineEvent) { e.EngineRunRef = json.RawMessage(`nope`) }},
		{"emittedAt", func(e *runstore.CanonicalEngineEvent) { e.EmittedAt = "yesterday" }},
		{"emittedAt", func(e *runstore.CanonicalEngineEvent) { e.EmittedAt = "" }},
		{"emittedAt", func(e *runstore.CanonicalEngineEvent) { e.EmittedAt = "2026-02-11 10:00:00" }},
		{"eventType", func(e *runstore.CanonicalEngineEvent) { e.EventType = strings.Repeat("x", 65) }},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			ev := Event(runID, "RunStarted", "bad-"+c.field)
			c.edit(&ev)
			_, err := s.AppendEvent(ctx, ev)
			require.Error(t, err, c.field)
			require.ErrorIs(t, err, runstore.ErrInvalidInput, c.field)
			var ve *runstore.ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, c.field, ve.Field)
		})
	}
	require.Empty(t, fetchAll(t, s, runID), "nothing written for bad input")

	for _, lim := range []int{0, -1} {
		_, err := s.FetchEvents(ctx, runID, &runstore.FetchOptions{Limit: lim})
		var ve *runstore.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Equal(t, "limit", ve.Field)
		require.ErrorIs(t, err, runstore.ErrInvalidInput)
	}
	_, err := s.FetchEvents(ctx, runID, &runstore.FetchOptions{AfterSeq: -1, Limit: 1})
	require.ErrorIs(t, err, runstore.ErrInvalidInput)
	_, err = s.FetchEvents(ctx, "", nil)
	require.ErrorIs(t, err, runstore.ErrInvalidInput)
	_, err = s.GetSnapshot(ctx, "")
	require.ErrorIs(t, err, runstore.ErrInvalidInput)
	_, err = s.ProjectSnapshot(ctx, "")
	require.ErrorIs(t, err, runstore.ErrInvalidInput)
}

func testKeyHelper(t *testing.T, _ runstore.StateStore, _ Options) {
	k := runstore.IdempotencyKey("r1", "s1", "l1", "StepCompleted", "v1")
	require.Len(t, k, 64)
	require.Equal(t, strings.ToLower(k), k)
	// sha256("r1|s1|l1|StepCompleted|v1")
	require.Equal(t, "f2b829db15f7909e90a7f9dea1a48e9991abddb798f250b885b6faf2bfaedfdd", k)
	require.Equal(t, k, runstore.IdempotencyKey("r1", "s1", "l1", "StepCompleted", "v1"))
	seen := map[string]bool{k: true}
	for _, other := range []string{
		runstore.IdempotencyKey("r2", "s1", "l1", "StepCompleted", "v1"),
		runstore.IdempotencyKey("r1", "s2", "l1", "StepCompleted", "v1"),
		runstore.IdempotencyKey("r1", "s1", "l2", "StepCompleted", "v1"),
		runstore.IdempotencyKey("r1", "s1", "l1", "StepFailed", "v1"),
		runstore.IdempotencyKey("r1", "s1", "l1", "StepCompleted", "v2"),
	} {
		require.False(t, seen[other])
		seen[other] = true
	}
}

func step(runID, typ, stepID, key string) runstore.CanonicalEngineEvent {
	ev := Event(runID, typ, key)
	ev.StepID = stepID
	ev.LogicalAttemptID = "1"
	return ev
}

// waitSnapshot returns GetSnapshot once it reflects lastSeq.
func waitSnapshot(t *testing.T, s runstore.StateStore, o Options, runID string, lastSeq int64) *runstore.RunSnapshot {
	t.Helper()
	return waitSnapshotFor(t, s, o, runID, func(snap *runstore.RunSnapshot) bool { return snap.LastEventSeq >= lastSeq })
}

// waitSnapshotFor returns GetSnapshot once done accepts it (after CatchUp when
// the store has CatchUp; otherwise polling).
func waitSnapshotFor(t *testing.T, s runstore.StateStore, o Options, runID string, done func(*runstore.RunSnapshot) bool) *runstore.RunSnapshot {
	t.Helper()
	ctx := t.Context()
	if sy, ok := s.(syncer); ok {
		require.NoError(t, sy.CatchUp(ctx))
		snap, err := s.GetSnapshot(ctx, runID)
		require.NoError(t, err)
		return snap
	}
	var snap *runstore.RunSnapshot
	await.Until(t, o.SnapshotTimeout, func() (bool, string) {
		var err error
		snap, err = s.GetSnapshot(ctx, runID)
		require.NoError(t, err)
		return snap != nil && done(snap), fmt.Sprintf("GetSnapshot not caught up: %+v", snap)
	})
	return snap
}

func requireSameSnapshot(t *testing.T, want, got *runstore.RunSnapshot) {
	t.Helper()
	require.NotNil(t, got)
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
}

func testDefaultReducer(t *testing.T, s runstore.StateStore, o Options) {
	ctx := t.Context()
	check := func(t *testing.T, runID string, events []runstore.CanonicalEngineEvent, status string) *runstore.RunSnapshot {
		t.Helper()
		var last int64
		for _, ev := range events {
			r, err := s.AppendEvent(ctx, ev)
			require.NoError(t, err)
			last = r.RunSeq
		}
		p, err := s.ProjectSnapshot(ctx, runID)
		require.NoError(t, err)
		require.Equal(t, status, p.Status)
		require.Equal(t, last, p.LastEventSeq)
		requireSameSnapshot(t, p, waitSnapshot(t, s, o, runID, last))
		return p
	}
	r := newRunID(t)
	p := check(t, r, []runstore.CanonicalEngineEvent{
		Event(r, "RunStarted", "1"),
		step(r, "StepStarted", "a", "2"),
		step(r, "StepStarted", "b", "3"),
		step(r, "StepCompleted", "a", "4"),
		step(r, "StepFailed", "b", "5"),
		step(r, "StepStarted", "b", "6"),
		Event(r, "SomethingUnknown", "7"),
	}, "RUNNING")
	require.Equal(t, "COMPLETED", p.Steps["a"].Status)
	require.Equal(t, 1, p.Steps["a"].Attempts)
	require.Equal(t, "RUNNING", p.Steps["b"].Status)
	require.Equal(t, 2, p.Steps["b"].Attempts)
	require.NotEmpty(t, p.StartedAt)
	require.Empty(t, p.CompletedAt)

	for typ, status := range map[string]string{
		"RunCompleted": "COMPLETED", "RunFailed": "FAILED", "RunCancelled": "CANCELLED",
	} {
		t.Run(typ, func(t *testing.T) {
			r := newRunID(t)
			p := check(t, r, []runstore.CanonicalEngineEvent{Event(r, "RunStarted", "1"), Event(r, typ, "2")}, status)
			require.NotEmpty(t, p.CompletedAt)
		})
	}
	// Unknown types only: the run exists but stays PENDING.
	r = newRunID(t)
	check(t, r, []runstore.CanonicalEngineEvent{Event(r, "Whatever", "1")}, "PENDING")

	// Unknown run: GetSnapshot nil, ProjectSnapshot empty.
	unknown := newRunID(t)
	snap, err := s.GetSnapshot(ctx, unknown)
	require.NoError(t, err)
	require.Nil(t, snap)
	p, err = s.ProjectSnapshot(ctx, unknown)
	require.NoError(t, err)
	require.Equal(t, int64(0), p.LastEventSeq)
}

func testSnapshotsAgree(t *testing.T, s runstore.StateStore, o Options) {
	ctx := t.Context()
	runs := make([]string, 4)
	for i := range runs {
		runs[i] = newRunID(t)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(runs)*50)
	for _, r := range runs {
		wg.Go(func() {
			evs := []runstore.CanonicalEngineEvent{Event(r, "RunStarted", "start")}
			for i := range 20 {
				evs = append(evs, step(r, "StepStarted", fmt.Sprint(i%5), fmt.Sprintf("s%d", i)),
					step(r, "StepCompleted", fmt.Sprint(i%5), fmt.Sprintf("c%d", i)))
			}
			for _, ev := range evs {
				if _, err := s.AppendEvent(ctx, ev); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, r := range runs {
		p, err := s.ProjectSnapshot(ctx, r)
		require.NoError(t, err)
		require.Equal(t, int64(41), p.EventCount)
		requireSameSnapshot(t, p, waitSnapshot(t, s, o, r, p.LastEventSeq))
	}
}

func testRetention(t *testing.T, s runstore.StateStore, o Options) {
	rt, ok := s.(retainer)
	if !ok {
		t.Skip("store has no DeleteRun and ExportRun")
	}
	ctx := t.Context()
	keep, drop := newRunID(t), newRunID(t)
	for _, r := range []string{keep, drop} {
		for i := range 12 {
			_, err := s.AppendEvent(ctx, Event(r, "Tick", fmt.Sprint(i)))
			require.NoError(t, err)
		}
		_, err := s.AppendEvent(ctx, Event(r, "RunStarted", "start"))
		require.NoError(t, err)
	}
	snap := waitSnapshot(t, s, o, drop, 13)
	require.NotNil(t, snap)

	var buf bytes.Buffer
	n, err := rt.ExportRun(ctx, drop, &buf)
	require.NoError(t, err)
	require.Equal(t, int64(13), n)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 13)
	all := fetchAll(t, s, drop)
	for i, line := range lines {
		var ev runstore.CanonicalEngineEvent
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		require.Equal(t, all[i].RunSeq, ev.RunSeq)
		require.Equal(t, all[i].EventID, ev.EventID)
		require.Equal(t, all[i].IdempotencyKey, ev.IdempotencyKey)
	}

	deleted, err := rt.DeleteRun(ctx, drop)
	require.NoError(t, err)
	require.Equal(t, int64(13), deleted)
	require.Empty(t, fetchAll(t, s, drop))
	if sy, ok := s.(syncer); ok {
		require.NoError(t, sy.CatchUp(ctx))
	}
	snap, err = s.GetSnapshot(ctx, drop)
	require.NoError(t, err)
	require.Nil(t, snap, "retention removes the run's snapshot")
	require.Len(t, fetchAll(t, s, keep), 13, "other runs are untouched")
	snap, err = s.GetSnapshot(ctx, keep)
	require.NoError(t, err)
	require.NotNil(t, snap)

	var empty bytes.Buffer
	n, err = rt.ExportRun(ctx, drop, &empty)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, empty.Len())
	_, err = rt.DeleteRun(ctx, "")
	require.True(t, errors.Is(err, runstore.ErrInvalidInput))
}

// testResync: a gap opens in a run (an event written at last+2) and fills
// later (last+1). Each time, GetSnapshot must come to equal ProjectSnapshot:
// the gap is recorded, and the late event is folded in runSeq order rather
// than dropped as "at or below the snapshot's lastEventSeq" (§4.2: the run is
// marked STALE, its snapshot rebuilt from its events, then resumed).
func testResync(t *testing.T, s runstore.StateStore, o Options) {
	if o.WriteAt == nil {
		t.Skip("Options.WriteAt not set")
	}
	ctx := t.Context()
	r := newRunID(t)
	var last int64
	for i := range 3 {
		res, err := s.AppendEvent(ctx, step(r, "StepStarted", "a", fmt.Sprint("s", i)))
		require.NoError(t, err)
		last = res.RunSeq
	}
	waitSnapshot(t, s, o, r, last)

	gap := step(r, "StepCompleted", "a", "late-2")
	gap.RunSeq = last + 2
	o.WriteAt(t, s, gap)
	snap := waitSnapshot(t, s, o, r, last+2)
	p, err := s.ProjectSnapshot(ctx, r)
	require.NoError(t, err)
	require.Equal(t, int64(4), p.EventCount)
	requireSameSnapshot(t, p, snap)

	fill := step(r, "StepFailed", "a", "late-1")
	fill.RunSeq = last + 1
	o.WriteAt(t, s, fill)
	snap = waitSnapshotFor(t, s, o, r, func(snap *runstore.RunSnapshot) bool { return snap.EventCount == 5 })
	p, err = s.ProjectSnapshot(ctx, r)
	require.NoError(t, err)
	require.Equal(t, int64(5), p.EventCount)
	require.Equal(t, "COMPLETED", p.Steps["a"].Status, "folded in runSeq order: StepFailed, then StepCompleted")
	requireSameSnapshot(t, p, snap)

	// And the run resumes: the next append follows the highest runSeq.
	res, err := s.AppendEvent(ctx, Event(r, "RunCompleted", "end"))
	require.NoError(t, err)
	require.Greater(t, res.RunSeq, last+2)
	snap = waitSnapshot(t, s, o, r, res.RunSeq)
	p, err = s.ProjectSnapshot(ctx, r)
	require.NoError(t, err)
	requireSameSnapshot(t, p, snap)
	require.Equal(t, "COMPLETED", snap.Status)
}
