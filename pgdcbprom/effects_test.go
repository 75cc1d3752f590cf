package pgdcbprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/pgdcbprom"
)

// attempts records what an effects.Tracer receives.
type attempts struct {
	mu     sync.Mutex
	starts []effects.TraceAttemptData
	ends   []effects.TraceAttemptData
}

type attemptKey struct{}

func (a *attempts) TraceAttemptStart(ctx context.Context, d effects.TraceAttemptData) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.starts = append(a.starts, d)
	return context.WithValue(ctx, attemptKey{}, d.EffectID)
}

func (a *attempts) TraceAttemptEnd(ctx context.Context, d effects.TraceAttemptData) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Value(attemptKey{}) != d.EffectID {
		panic("TraceAttemptEnd did not get the context TraceAttemptStart returned")
	}
	a.ends = append(a.ends, d)
}

func (a *attempts) snapshot() ([]effects.TraceAttemptData, []effects.TraceAttemptData) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.starts), slices.Clone(a.ends)
}

// gatherEffects returns the worker's series by name, checking each carries
// the worker label.
func gatherEffects(t *testing.T, reg *prometheus.Registry, worker string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			require.Len(t, m.GetLabel(), 1)
			require.Equal(t, "worker", m.GetLabel()[0].GetName())
			if m.GetLabel()[0].GetValue() != worker {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				out[mf.GetName()] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// A worker's collectors count what it did, poison effects included, and
// report the unfinished effects it knows of: here one of a type no worker
// handles, which stays pending. Its Tracer sees each attempt, the handler
// running under the context TraceAttemptStart returned.
func TestWorkerCollectors(t *testing.T) {
	t.Parallel()
	s, _ := teststore.New(t, nil)
	q, err := effects.New(s, nil)
	require.NoError(t, err)
	poison := requestJob(t, q, "a", "poison", nil)
	requestJob(t, q, "b", "ok-1", nil)
	requestJob(t, q, "c", "ok-2", nil)
	_, _, err = q.Request(context.Background(), effects.Request{Type: "unhandled", Session: "d", DedupeKey: "u", Payload: json.RawMessage(`{}`)})
	require.NoError(t, err)

	tr := &attempts{}
	var untraced atomic.Int32
	w, err := effects.NewWorker(s, &effects.Config{Identity: "w-1", MaxAttempts: 1, PollInterval: 50 * time.Millisecond,
		Tracer: tr,
		Handlers: map[string]effects.Handler{"job": func(ctx context.Context, e effects.Effect) error {
			if ctx.Value(attemptKey{}) != e.ID {
				untraced.Add(1)
			}
			if e.ID == poison {
				return errors.New("boom")
			}
			return nil
		}}})
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	pm := pgdcbprom.New()
	pm.WatchEffects(w)
	require.NoError(t, reg.Register(pm))
	before := gatherEffects(t, reg, "w-1")
	require.Equal(t, 10, len(before), "every series is there before Run: %v", before)
	require.Zero(t, before["pgdcb_effects_backlog"])

	stop := startWorkers(t, w)
	defer stop()
	await.Until(t, time.Minute, func() (bool, string) { // two effects executed, one failed for good, one left
		m := gatherEffects(t, reg, "w-1")
		return m["pgdcb_effects_executed_total"] == 2 && m["pgdcb_effects_failed_total"] == 1 &&
			m["pgdcb_effects_backlog"] == 1, fmt.Sprint(m)
	})
	m := gatherEffects(t, reg, "w-1")
	require.Equal(t, 3.0, m["pgdcb_effects_claims_total"])
	require.Zero(t, m["pgdcb_effects_retried_total"], "MaxAttempts 1: no retry")
	require.Greater(t, m["pgdcb_effects_oldest_unfinished_seconds"], 0.0)
	await.Until(t, time.Minute, func() (bool, string) { // three attempts traced to their end
		_, ends := tr.snapshot()
		return len(ends) == 3, fmt.Sprint(len(ends))
	})
	starts, ends := tr.snapshot()
	require.Len(t, starts, 3)
	require.Len(t, ends, 3)
	require.Zero(t, untraced.Load(), "a handler ran outside its attempt's traced context")
	for _, e := range ends {
		require.Equal(t, "w-1", e.Worker)
		require.Equal(t, 1, e.Attempt)
		require.NoError(t, e.RecordErr)
		require.Equal(t, e.EffectID == poison, e.Err != nil, "the poison effect's attempt, and only it, ends with the handler's error")
	}

	// A second worker is exported beside the first under its own label.
	w2, err := effects.NewWorker(s, &effects.Config{Identity: "w-2", Handlers: map[string]effects.Handler{"x": func(context.Context, effects.Effect) error { return nil }}})
	require.NoError(t, err)
	pm.WatchEffects(w2)
	require.Len(t, gatherEffects(t, reg, "w-2"), 10)
	require.Equal(t, 3.0, gatherEffects(t, reg, "w-1")["pgdcb_effects_claims_total"])
}

func requestJob(t testing.TB, q *effects.Queue, session, dedupeKey string, payload json.RawMessage) string {
	t.Helper()
	id, _, err := q.Request(context.Background(), effects.Request{Type: "job", Session: session, DedupeKey: dedupeKey, Payload: payload})
	require.NoError(t, err)
	return id
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
