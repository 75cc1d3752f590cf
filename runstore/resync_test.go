package runstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/tags"
)

// writeRunEventAt writes a run event with the given runSeq around the append
// authority (as a writer of a backend without locks could): a plain append of
// the row AppendEvent would write. The unique index on (runId, runSeq) still
// holds.
func writeRunEventAt(t testing.TB, es *eventstore.Store, ev runstore.CanonicalEngineEvent) {
	t.Helper()
	_, err := es.Append(context.Background(), []pgdcb.Event{runEventRow(t, ev,
		tags.Must(runstore.TagRunID, ev.RunID), tags.Must(runstore.TagIdempotencyKey, ev.IdempotencyKey))})
	require.NoError(t, err)
}

// runEventRow is the row AppendEvent would write for ev, with ev's runSeq and
// the given tags.
func runEventRow(t testing.TB, ev runstore.CanonicalEngineEvent, tt ...tags.Tag) pgdcb.Event {
	t.Helper()
	seq := ev.RunSeq
	ev, err := runstore.ValidateEvent(ev)
	require.NoError(t, err)
	ev.RunSeq = seq
	data, err := json.Marshal(ev)
	require.NoError(t, err)
	ts, err := tags.NewSet(tt...)
	require.NoError(t, err)
	return pgdcb.Event{Type: ev.EventType, Tags: ts, Data: data, Metadata: json.RawMessage(runstore.Marker)}
}

// resyncWatch records, at each resync, the runs marked STALE as StaleRuns
// and the pgdcb_runstore_stale_runs gauge report them.
type resyncWatch struct {
	mu    sync.Mutex
	seen  []runstore.StaleRun
	gauge []float64
}

func watchResyncs(t *testing.T, rs *runstore.Store, reg *metrics) *resyncWatch {
	w := &resyncWatch{}
	runstore.SetBeforeResync(rs, func([]runstore.StaleRun) {
		stale, err := rs.StaleRuns(context.Background())
		require.NoError(t, err)
		g := gauge(t, reg, "pgdcb_runstore_stale_runs")
		w.mu.Lock()
		defer w.mu.Unlock()
		w.seen = append(w.seen, stale...)
		w.gauge = append(w.gauge, g)
	})
	return w
}

func requireCurrent(t *testing.T, rs *runstore.Store, runID string) *runstore.RunSnapshot {
	t.Helper()
	ctx := context.Background()
	got, err := rs.GetSnapshot(ctx, runID)
	require.NoError(t, err)
	require.NotNil(t, got, runID)
	want, err := rs.ProjectSnapshot(ctx, runID)
	require.NoError(t, err)
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g), "%s: GetSnapshot = ProjectSnapshot", runID)
	return got
}

// §4.2: a non-contiguous observation (a gap: runSeq 5 after 3) marks the run
// STALE, its snapshot is rebuilt from its events (with the gap recorded), and
// when the gap fills later (runSeq 4), that too is a non-contiguous
// observation: the run is rebuilt again, in runSeq order, instead of the late
// event being dropped as "already applied" (before: the snapshot stayed at 4
// events, without runSeq 4).
func TestResyncOnNonContiguousObservation(t *testing.T) {
	t.Parallel()
	rs := newStore(t, nil)
	es := rs.EventStore()
	reg := registry(rs)
	watch := watchResyncs(t, rs, reg)
	ctx := context.Background()

	for i := 1; i <= 3; i++ {
		_, err := rs.AppendEvent(ctx, runEvent("g", fmt.Sprint("k", i)))
		require.NoError(t, err)
	}
	require.NoError(t, rs.CatchUp(ctx))
	require.Equal(t, int64(3), requireCurrent(t, rs, "g").EventCount)

	started := runEvent("g", "k5")
	started.EventType, started.RunSeq = "RunStarted", 5
	writeRunEventAt(t, es, started)
	require.NoError(t, rs.CatchUp(ctx))
	snap := requireCurrent(t, rs, "g")
	require.Equal(t, int64(5), snap.LastEventSeq)
	require.Equal(t, int64(4), snap.EventCount)
	require.Equal(t, []runstore.SeqRange{{From: 4, To: 4}}, snap.Gaps)
	require.Equal(t, runstore.StatusRunning, snap.Status)

	fill := runEvent("g", "k4")
	fill.EventType, fill.RunSeq = "RunCompleted", 4
	writeRunEventAt(t, es, fill)
	require.NoError(t, rs.CatchUp(ctx))
	snap = requireCurrent(t, rs, "g")
	require.Equal(t, int64(5), snap.LastEventSeq)
	require.Equal(t, int64(5), snap.EventCount, "the late runSeq 4 is applied")
	require.Empty(t, snap.Gaps)
	require.Equal(t, runstore.StatusRunning, snap.Status, "in runSeq order: RunCompleted (4) then RunStarted (5)")

	// The projection resumes incrementally.
	res, err := rs.AppendEvent(ctx, runEvent("g", "k6"))
	require.NoError(t, err)
	require.Equal(t, int64(6), res.RunSeq)
	require.NoError(t, rs.CatchUp(ctx))
	require.Equal(t, int64(6), requireCurrent(t, rs, "g").EventCount)

	watch.mu.Lock()
	defer watch.mu.Unlock()
	require.Len(t, watch.seen, 2)
	require.Equal(t, []string{"g", "g"}, []string{watch.seen[0].RunID, watch.seen[1].RunID})
	require.Equal(t, []string{runstore.StaleGap, runstore.StaleFill}, []string{watch.seen[0].Reason, watch.seen[1].Reason})
	require.Equal(t, []float64{1, 1}, watch.gauge, "the STALE run is visible in the gauge")
	stale, err := rs.StaleRuns(ctx)
	require.NoError(t, err)
	require.Empty(t, stale, "resumed")
	require.Zero(t, gauge(t, reg, "pgdcb_runstore_stale_runs"))
	require.Equal(t, 2.0, counter(t, reg, "pgdcb_runstore_projector_resyncs_total"))
}

// §5.2: a run behind by more than Config.ResyncLag (here a projector that was
// not running, then reads one event per batch) is marked STALE and rebuilt
// from its events: one batch brings every lagging run up to date instead of
// waiting for the tail to reach their events (before: one event per batch).
func TestResyncOnLag(t *testing.T) {
	t.Parallel()
	rs := newStore(t, &runstore.Config{ResyncLag: 300 * time.Millisecond, ProjectorBatch: 1})
	reg := registry(rs)
	watch := watchResyncs(t, rs, reg)
	ctx := context.Background()

	const runs, perRun = 3, 5
	for i := range runs * perRun {
		_, err := rs.AppendEvent(ctx, runEvent(fmt.Sprint("lag-", i%runs), fmt.Sprint("k", i)))
		require.NoError(t, err)
	}
	// The projector is late: every event is older than ResyncLag by the
	// server's clock (the one the lag check reads).
	es := rs.EventStore()
	await.True(t, time.Minute, "every event older than ResyncLag", func() bool {
		var old bool
		require.NoError(t, es.Pool().QueryRow(ctx, `SELECT max(occurred_at) < now() - interval '300 milliseconds' FROM `+ident.Schema(es)+`.events`).Scan(&old))
		return old
	})
	// The tail reads below the cluster's horizon: another test's open
	// transaction on the shared server made it read nothing (failed once
	// in .ci/run under load: "the tail read one event", got 0).
	waitLogBelowHorizon(t, rs)

	st, err := rs.Projector().Step(ctx)
	require.NoError(t, err)
	n := st.Events
	require.Equal(t, 1, n, "the tail read one event")
	for r := range runs {
		require.Equal(t, int64(perRun), requireCurrent(t, rs, fmt.Sprint("lag-", r)).EventCount)
	}
	watch.mu.Lock()
	require.Len(t, watch.seen, runs)
	for _, s := range watch.seen {
		require.Equal(t, runstore.StaleLag, s.Reason)
	}
	require.Equal(t, []float64{runs}, watch.gauge)
	watch.mu.Unlock()
	require.Equal(t, float64(runs), counter(t, reg, "pgdcb_runstore_projector_resyncs_total"))

	// The tail passes the same events later and applies none twice (CatchUp
	// would return at once: the snapshots hold every event already).
	for {
		st, err := rs.Projector().Step(ctx)
		require.NoError(t, err)
		n := st.Events
		if n == 0 {
			break
		}
	}
	for r := range runs {
		require.Equal(t, int64(perRun), requireCurrent(t, rs, fmt.Sprint("lag-", r)).EventCount)
	}
	require.Equal(t, float64(runs), counter(t, reg, "pgdcb_runstore_projector_resyncs_total"))
	lag, err := rs.SnapshotLag(ctx)
	require.NoError(t, err)
	require.Zero(t, lag.Lag)
}
