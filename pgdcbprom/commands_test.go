package pgdcbprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/query"
)

// The handlers of package commands' tests: a counter.

var errLimit = errors.New("counter: limit reached")

// increment adds one to a counter unless it reached limit.
func increment(id string, limit int) commands.HandlerFunc {
	return func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		m := pgdcb.NewModel(query.Tagged([]string{"Incremented"}, "counter="+id), 0,
			func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
		cond, err := dc.Project(ctx, m)
		if err != nil {
			return nil, cond, err
		}
		if m.State >= limit {
			return nil, cond, errLimit
		}
		ev, err := pgdcb.NewEvent("Incremented", map[string]int{"n": m.State + 1}, "counter="+id)
		return []pgdcb.Event{ev}, cond, err
	}
}

// conflicting is increment with an event appended between its decision and
// its append on the attempts conflictOn selects.
func conflicting(s pgdcb.Store, id string, conflictOn func(attempt int) bool, calls *atomic.Int32) commands.HandlerFunc {
	inc := increment(id, 1000)
	return func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		calls.Add(1)
		evs, cond, err := inc(ctx, dc)
		if err == nil && conflictOn(dc.Attempt) {
			_, aerr := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Incremented", map[string]int{}, "counter="+id)})
			if aerr != nil {
				return nil, cond, aerr
			}
		}
		return evs, cond, err
	}
}

func cmd(typ string, h commands.Handler) commands.Command {
	return commands.Command{Type: typ, Data: json.RawMessage(fmt.Sprintf(`{"t":%q}`, typ)), Handler: h}
}

// Moved from package commands' tests: the executor's metrics.
func TestCommandsMetricsOfAnExecutor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := pgdcbprom.New()
	s, _ := teststore.New(t, nil)
	ex, err := commands.New(s, &commands.Config{MaxAttempts: 2, RetryMin: 1, RetryMax: 1, Tracer: m})
	require.NoError(t, err)
	id := uuid.New()
	c := cmd("Increment", increment("a", 1))
	c.ID = id
	_, err = ex.Execute(ctx, c)
	require.NoError(t, err)
	_, err = ex.Execute(ctx, c) // duplicate
	require.NoError(t, err)
	_, err = ex.Execute(ctx, cmd("Increment", increment("a", 1))) // rejected
	require.Error(t, err)
	var calls atomic.Int32
	_, err = ex.Execute(ctx, cmd("Increment", conflicting(s, "b", func(int) bool { return true }, &calls)))
	require.Error(t, err)

	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	series := map[string]int{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			series[mf.GetName()]++
			switch {
			case m.GetCounter() != nil:
				got[mf.GetName()] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				got[mf.GetName()] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	require.InDelta(t, 1, got["pgdcb_commands_executed_total"], 0)
	require.InDelta(t, 2, got["pgdcb_commands_failed_total"], 0) // one rejected, one conflict
	require.Equal(t, 2, series["pgdcb_commands_failed_total"])
	require.InDelta(t, 1, got["pgdcb_commands_retried_total"], 0) // MaxAttempts 2: one retry
	require.InDelta(t, 1, got["pgdcb_commands_idempotent_total"], 0)
	require.InDelta(t, 3, got["pgdcb_commands_attempts"], 0) // executed, rejected, exhausted
	require.InDelta(t, 4, got["pgdcb_commands_duration_seconds"], 0)
}
