package runstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/tags"
)

// The snapshot projector is a projection: a batch that fails is retried with
// backoff and recorded in the checkpoint, MaxAttempts failures in a row make
// it FAILED, and Resume continues from the checkpoint. Run keeps going all
// along (before, it returned the first error of a batch and the projector
// stopped until someone restarted it).
func TestProjectorFailsAndResumes(t *testing.T) {
	t.Parallel()
	rs := newStore(t, &runstore.Config{PollInterval: 20 * time.Millisecond,
		Projection: &projection.ReaderConfig{RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, MaxAttempts: 3}})
	es := rs.EventStore()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := rs.AppendEvent(ctx, runEvent("good", "k1"))
	require.NoError(t, err)
	// A run event the store cannot decode (written around AppendEvent).
	bad := pgdcb.MustEvent("StepCompleted", map[string]any{"runId": 5}, tags.Must(runstore.TagRunID, "bad").String())
	bad.Metadata = json.RawMessage(runstore.Marker)
	_, err = es.Append(ctx, []pgdcb.Event{bad})
	require.NoError(t, err)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rs.Projector().Run(runCtx) }()
	defer func() { stop(); <-done }()

	var st projection.Status
	require.Eventually(t, func() bool {
		st, err = rs.Projector().Status(ctx)
		return err == nil && st.State == projection.Failed
	}, 30*time.Second, 5*time.Millisecond, "the projector never became FAILED: %+v", st)
	require.Equal(t, 3, st.ErrorCount)
	require.Contains(t, st.LastError, "cannot be decoded")
	require.Equal(t, 1, strings.Count(st.LastError, "pgdcb:"), "one prefix: %s", st.LastError)
	select {
	case err := <-done:
		t.Fatalf("Run returned on a failed batch: %v", err)
	default:
	}
	require.ErrorIs(t, rs.CatchUp(ctx), projection.ErrNotActive, "CatchUp of a FAILED projector says so")

	// Retention removes the bad run; Resume continues from the checkpoint.
	_, err = rs.DeleteRun(ctx, "bad")
	require.NoError(t, err)
	require.NoError(t, rs.Projector().Resume(ctx))
	require.Eventually(t, func() bool {
		snap, err := rs.GetSnapshot(ctx, "good")
		return err == nil && snap != nil && snap.LastEventSeq == 1
	}, 30*time.Second, 5*time.Millisecond)
	st, err = rs.Projector().Status(ctx)
	require.NoError(t, err)
	require.Equal(t, projection.Active, st.State)
}

// A checkpoint row the projector wrote before it ran on package projection
// (same checkpoints table and row, Config.ProjectorName, written by an
// upsert without leader or heartbeat) is continued from: the events before
// it are not read again.
func TestProjectorContinuesAnEarlierCheckpoint(t *testing.T) {
	t.Parallel()
	rs := newStore(t, nil)
	es := rs.EventStore()
	reg := registry(rs)
	ctx := context.Background()
	for i := range 3 {
		_, err := rs.AppendEvent(ctx, runEvent("r1", fmt.Sprint("k", i)))
		require.NoError(t, err)
	}
	// What the earlier projector left after a batch of two: the snapshot of
	// runSeq 1..2 and its checkpoint at the second event.
	snap := runstore.NewSnapshot("r1")
	for _, ev := range runEvents(t, rs, "r1")[:2] {
		snap.Fold(ev, nil)
	}
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	schema := ident.Schema(es)
	_, err = es.Pool().Exec(ctx, `INSERT INTO `+schema+`.run_snapshots (run_id, status, last_event_seq, snapshot_data)
		VALUES ('r1', $1, 2, $2)`, snap.Status, data)
	require.NoError(t, err)
	_, err = es.Pool().Exec(ctx, `INSERT INTO `+schema+`.checkpoints (name, transaction_id, position, updated_at, error_count, last_error)
		SELECT $1, transaction_id, position, now(), 0, NULL FROM `+schema+`.events
		ORDER BY transaction_id, position OFFSET 1 LIMIT 1`, runstore.DefaultProjectorName)
	require.NoError(t, err)

	// The count is the tail's: let the horizon pass the log first (CatchUp
	// returns once the snapshot holds the event, which the projector may
	// apply beyond a horizon a parallel test holds).
	waitLogBelowHorizon(t, rs)
	require.NoError(t, rs.CatchUp(ctx))
	got := requireCurrent(t, rs, "r1")
	require.Equal(t, int64(3), got.LastEventSeq)
	require.Equal(t, int64(3), got.EventCount)
	require.Equal(t, 1.0, counter(t, reg, "pgdcb_runstore_projector_events_total"), "only the event after the checkpoint was read")
}

// CatchUp beside a running projector waits for the run events only: with the
// leader elsewhere and other traffic after the last run event, it returns
// once the leader applied that event. Before, it waited for the leader's
// checkpoint to pass the head of the log, which the leader moves past other
// events only at its heartbeat (here an hour: CatchUp ran into its deadline).
func TestCatchUpBesideARunningProjector(t *testing.T) {
	t.Parallel()
	rs := newStore(t, &runstore.Config{PollInterval: 20 * time.Millisecond,
		Projection: &projection.ReaderConfig{HeartbeatInterval: time.Hour}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runLeadingProjector(t, ctx, rs)

	_, err := rs.AppendEvent(ctx, runEvent("r1", "k1"))
	require.NoError(t, err)
	appendOther(t, rs.EventStore(), 5, 0)
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	require.NoError(t, rs.CatchUp(cctx))
	snap := requireCurrent(t, rs, "r1")
	require.Equal(t, int64(1), snap.LastEventSeq)
}
