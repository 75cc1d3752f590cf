package runstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/runstore/conformance"
)

// The projector running in the background keeps run_snapshots current and
// stops with its context.
func TestProjectorRun(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Projector().Run(ctx) }()

	var last int64
	for i := range 30 {
		r, err := s.AppendEvent(context.Background(), conformance.Event("r1", "Tick", fmt.Sprint(i)))
		require.NoError(t, err)
		last = r.RunSeq
	}
	_, err := s.AppendEvent(context.Background(), conformance.Event("r1", "RunCompleted", "end"))
	require.NoError(t, err)
	last++
	require.Eventually(t, func() bool {
		snap, err := s.GetSnapshot(context.Background(), "r1")
		return err == nil && snap != nil && snap.LastEventSeq == last
	}, 30*time.Second, 20*time.Millisecond)
	snap, err := s.GetSnapshot(context.Background(), "r1")
	require.NoError(t, err)
	require.Equal(t, runstore.StatusCompleted, snap.Status)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	lag, err := s.SnapshotLag(context.Background())
	require.NoError(t, err)
	require.Equal(t, runstore.Lag{}, lag, "caught up: no lag, no alert")
}

// Two projector instances over one checkpoint apply each event exactly once.
func TestProjectorsTakeTurns(t *testing.T) {
	t.Parallel()
	s := newStore(t, &runstore.Config{ProjectorBatch: 3})
	for i := range 40 {
		_, err := s.AppendEvent(context.Background(), conformance.Event(fmt.Sprintf("r%d", i%4), "Tick", fmt.Sprint(i)))
		require.NoError(t, err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- s.CatchUp(context.Background()) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	for i := range 4 {
		snap, err := s.GetSnapshot(context.Background(), fmt.Sprintf("r%d", i))
		require.NoError(t, err)
		require.Equal(t, int64(10), snap.EventCount)
		require.Equal(t, int64(10), snap.LastEventSeq)
	}
}

// A custom reducer replaces the default one, in the projector and on demand.
func TestCustomReducer(t *testing.T) {
	t.Parallel()
	count := func(s *runstore.RunSnapshot, ev runstore.CanonicalEngineEvent) {
		var n map[string]int
		_ = json.Unmarshal(s.Data, &n)
		if n == nil {
			n = map[string]int{}
		}
		n[ev.EventType]++
		s.Data, _ = json.Marshal(n)
		s.Status = "CUSTOM"
	}
	s := newStore(t, &runstore.Config{Reducer: count})
	for i, typ := range []string{"RunStarted", "A", "A", "B"} {
		_, err := s.AppendEvent(context.Background(), conformance.Event("r", typ, fmt.Sprint(i)))
		require.NoError(t, err)
	}
	p, err := s.ProjectSnapshot(context.Background(), "r")
	require.NoError(t, err)
	require.JSONEq(t, `{"RunStarted":1,"A":2,"B":1}`, string(p.Data))
	require.Equal(t, "CUSTOM", p.Status)
	require.NoError(t, s.CatchUp(context.Background()))
	g, err := s.GetSnapshot(context.Background(), "r")
	require.NoError(t, err)
	require.JSONEq(t, string(p.Data), string(g.Data))
	require.Equal(t, p.Status, g.Status)
}

// An eventId is unique across the store: reusing it for another event fails,
// nothing is written.
func TestEventIDConflict(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	id := uuid.NewString()
	a := conformance.Event("r", "A", "k1")
	a.EventID = id
	_, err := s.AppendEvent(context.Background(), a)
	require.NoError(t, err)
	b := conformance.Event("r", "B", "k2")
	b.EventID = id
	_, err = s.AppendEvent(context.Background(), b)
	require.ErrorIs(t, err, runstore.ErrEventIDConflict)
	evs, err := s.FetchEvents(context.Background(), "r", nil)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	// A retry of the first one with its own eventId is still a duplicate.
	r, err := s.AppendEvent(context.Background(), a)
	require.NoError(t, err)
	require.True(t, r.Idempotent)
}

// Limits beyond Config.MaxFetchLimit are refused.
func TestFetchMaxLimit(t *testing.T) {
	t.Parallel()
	s := newStore(t, &runstore.Config{MaxFetchLimit: 10})
	_, err := s.FetchEvents(context.Background(), "r", &runstore.FetchOptions{Limit: 11})
	var ve *runstore.ValidationError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, "limit", ve.Field)
	_, err = s.FetchEvents(context.Background(), "r", &runstore.FetchOptions{Limit: 10})
	require.NoError(t, err)
}

// A batch takes the projector's lock before it reads the tail
// (projection.BeforeReader): a DeleteRun holding the lock when the batch
// starts commits first, and the batch then reads the log without the run's
// events, so no snapshot of the deleted run appears. (Before, the batch read
// first and re-checked each event by primary key after the lock.)
func TestProjectorBatchAfterDeleteRunHoldingTheLock(t *testing.T) {
	t.Parallel()
	rs := newStore(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range []string{"k1", "k2"} {
		_, err := rs.AppendEvent(ctx, runEvent("r1", k))
		require.NoError(t, err)
	}
	waitLogBelowHorizon(t, rs)
	es := rs.EventStore()
	schema := ident.Schema(es)

	// DeleteRun's transaction, by hand: the lock, the deletion, no commit yet.
	tx, err := es.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`, es.Schema(), runstore.DefaultProjectorName)
	require.NoError(t, err)
	var deleted int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT `+schema+`.delete_events_tagged($1)`, runstore.TagRunID+"=r1").Scan(&deleted))
	require.Equal(t, int64(2), deleted)

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := rs.Projector().Step(ctx)
		done <- result{st.Events, err}
	}()
	// The batch waits for the lock.
	require.Eventually(t, func() bool {
		var waiting bool
		err := es.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = hashtext($1)::oid AND objid = hashtext($2)::oid AND objsubid = 2)`,
			es.Schema(), runstore.DefaultProjectorName).Scan(&waiting)
		return err == nil && waiting
	}, 30*time.Second, 5*time.Millisecond, "the batch waits for the projector's lock")
	require.NoError(t, tx.Commit(ctx))
	res := <-done
	require.NoError(t, res.err)
	require.Zero(t, res.n, "the batch read after the deletion")
	snap, err := rs.GetSnapshot(ctx, "r1")
	require.NoError(t, err)
	require.Nil(t, snap, "no snapshot of the deleted run")
}

// Projector().Reset empties run_snapshots and moves the checkpoint to the
// start in one transaction; the projector then rebuilds every snapshot.
func TestProjectorReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, nil)
	for i, typ := range []string{"RunStarted", "StepStarted", "RunCompleted"} {
		_, err := s.AppendEvent(ctx, conformance.Event("r", typ, fmt.Sprint(i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.CatchUp(ctx))
	before, err := s.GetSnapshot(ctx, "r")
	require.NoError(t, err)
	require.NotNil(t, before)

	require.NoError(t, s.Projector().Reset(ctx))
	gone, err := s.GetSnapshot(ctx, "r")
	require.NoError(t, err)
	require.Nil(t, gone, "Reset empties run_snapshots")
	st, err := s.Projector().Status(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Cursor.TransactionID, "Reset moves the checkpoint to the start")

	require.NoError(t, s.CatchUp(ctx))
	after, err := s.GetSnapshot(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, before, after)
}
