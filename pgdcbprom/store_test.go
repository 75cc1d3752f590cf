package pgdcbprom_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/pgdcbtest"
)

// fixedStats returns the same counters at every scrape.
type fixedStats struct {
	g eventstore.GroupStats
	s eventstore.SettleStats
}

func (f fixedStats) GroupStats() eventstore.GroupStats   { return f.g }
func (f fixedStats) SettleStats() eventstore.SettleStats { return f.s }

// Each counter of GroupStats and SettleStats lands in its own series, and the
// queue-wait buckets become a cumulative histogram.
func TestStoreCollectorSeries(t *testing.T) {
	t.Parallel()
	st := fixedStats{
		g: eventstore.GroupStats{Groups: 3, Grouped: 11, Alone: 5, Retried: 2, Busy: 7, Requeued: 1,
			Queued: 6, QueueWait: 30 * time.Millisecond, QueueWaits: []eventstore.WaitBucket{
				{Max: time.Millisecond, Count: 4}, {Max: 10 * time.Millisecond, Count: 1},
				{Max: time.Duration(math.MaxInt64), Count: 1}}},
		s: eventstore.SettleStats{Settled: 9, Present: 4, Absent: 5, Resent: 3, Unknown: 2, Terminated: 6, DeadConns: 8, NotSent: 10},
	}
	reg := prometheus.NewPedanticRegistry()
	m := pgdcbprom.New()
	m.WatchStore(st)
	require.NoError(t, reg.Register(m))
	require.Equal(t, map[string]float64{
		"pgdcb_store_group_commits_total{group}":         3,
		"pgdcb_store_group_commits_total{alone}":         5,
		"pgdcb_store_group_appends_total{grouped}":       11,
		"pgdcb_store_group_appends_total{alone}":         5,
		"pgdcb_store_group_appends_total{retried}":       2,
		"pgdcb_store_group_appends_total{busy}":          7,
		"pgdcb_store_group_appends_total{requeued}":      1,
		"pgdcb_store_group_queue_wait_seconds{}":         6,
		"pgdcb_store_settle_total{present}":              4,
		"pgdcb_store_settle_total{absent}":               5,
		"pgdcb_store_settle_total{resent}":               3,
		"pgdcb_store_settle_total{unknown}":              2,
		"pgdcb_store_settle_terminated_backends_total{}": 6,
		"pgdcb_store_dead_connections_total{}":           8,
		"pgdcb_store_sends_repeated_total{}":             10,
	}, gather(t, reg))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "pgdcb_store_group_queue_wait_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		require.InDelta(t, 0.030, h.GetSampleSum(), 1e-9)
		var got [][2]float64
		for _, b := range h.GetBucket() {
			got = append(got, [2]float64{b.GetUpperBound(), float64(b.GetCumulativeCount())})
		}
		require.Equal(t, [][2]float64{{0.001, 4}, {0.010, 5}}, got)
		return
	}
	t.Fatal("pgdcb_store_group_queue_wait_seconds not gathered")
}

// On a real store, the collector reports what the store counted: every
// append of concurrent callers is either grouped or alone.
func TestStoreCollectorOfARealStore(t *testing.T) {
	t.Parallel()
	s := pgdcbtest.NewStore(t, &pgdcbtest.Options{OwnPool: true})
	reg := prometheus.NewPedanticRegistry()
	m := pgdcbprom.New()
	m.WatchStore(s)
	require.NoError(t, reg.Register(m))

	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := s.Append(t.Context(), []pgdcb.Event{pgdcb.MustEvent("Ticked", nil, "k=v")})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	got := gather(t, reg)
	g := s.GroupStats()
	require.Equal(t, float64(g.Grouped), got["pgdcb_store_group_appends_total{grouped}"])
	require.Equal(t, float64(g.Alone), got["pgdcb_store_group_appends_total{alone}"])
	require.Equal(t, float64(g.Groups), got["pgdcb_store_group_commits_total{group}"])
	require.Equal(t, float64(g.Queued), got["pgdcb_store_group_queue_wait_seconds{}"])
	if pgtest.GroupCommitDisabled() {
		require.Zero(t, got["pgdcb_store_group_appends_total{grouped}"]+got["pgdcb_store_group_appends_total{alone}"])
	} else {
		require.Equal(t, float64(n), got["pgdcb_store_group_appends_total{grouped}"]+got["pgdcb_store_group_appends_total{alone}"])
	}
	require.Zero(t, got["pgdcb_store_settle_total{unknown}"])
}
