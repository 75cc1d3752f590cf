package effects

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// backlog is what a worker knew of the unfinished effects at its last look
// at the log, for its collector. Written by Run's goroutine, read at scrape.
type backlog struct {
	unfinished atomic.Int64
	oldest     atomic.Int64 // RequestedAt of the oldest unfinished effect, Unix ns; 0: none
}

// observeBacklog records the index's unfinished effects (the worker's index keeps
// only those).
func (w *Worker) observeBacklog() {
	var oldest time.Time
	for _, e := range w.index.byID {
		if oldest.IsZero() || e.RequestedAt.Before(oldest) {
			oldest = e.RequestedAt
		}
	}
	w.backlog.unfinished.Store(int64(len(w.index.byID)))
	if oldest.IsZero() {
		w.backlog.oldest.Store(0)
	} else {
		w.backlog.oldest.Store(oldest.UnixNano())
	}
}

// Collectors returns the worker's Prometheus collectors, for the caller to
// register (nothing is registered globally): its Stats as counters
// pgdcb_effects_…_total, and the unfinished effects it knows of, measured at
// its last look at the log (pgdcb_effects_backlog and
// pgdcb_effects_oldest_unfinished_seconds; every worker of a store sees the
// same effects, so take the max over workers). Each series carries the label
// worker (Config.Identity), so the workers of one process register in one
// registry. docs/METRICS.md lists them.
func (w *Worker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{newWorkerCollector(w)}
}

type workerCollector struct {
	w                                                                       *Worker
	claims, executed, failed, retried, takeovers, lost, extended, conflicts *prometheus.Desc
	backlog, oldest                                                         *prometheus.Desc
}

func newWorkerCollector(w *Worker) *workerCollector {
	label := prometheus.Labels{"worker": w.cfg.Identity}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("pgdcb", "effects", name), help, nil, label)
	}
	return &workerCollector{w: w,
		claims:    d("claims_total", "Effects the worker claimed (attempts it started)."),
		executed:  d("executed_total", "Effects the worker completed."),
		failed:    d("failed_total", "Effects the worker failed for good: poison effects, after Config.MaxAttempts attempts."),
		retried:   d("retried_total", "Failed attempts the worker recorded that will be retried."),
		takeovers: d("lease_takeovers_total", "Claims of an effect whose previous lease had expired without a result."),
		lost:      d("lost_leases_total", "Results not recorded because another worker had taken the effect over."),
		extended:  d("lease_extensions_total", "Leases extended while a handler ran."),
		conflicts: d("claim_conflicts_total", "Claims lost to another worker or to a change of the session."),
		backlog:   d("backlog", "Unfinished effects (pending or executing, of any type) at the worker's last look at the log."),
		oldest:    d("oldest_unfinished_seconds", "Age of the oldest unfinished effect at the worker's last look at the log; 0 when none."),
	}
}

// Describe implements prometheus.Collector.
func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.claims, c.executed, c.failed, c.retried, c.takeovers, c.lost,
		c.extended, c.conflicts, c.backlog, c.oldest} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.w.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		v int64
	}{{c.claims, s.Claims}, {c.executed, s.Executed}, {c.failed, s.Failed}, {c.retried, s.Retried},
		{c.takeovers, s.LeaseTakeovers}, {c.lost, s.LostLeases}, {c.extended, s.LeaseExtensions}, {c.conflicts, s.ClaimConflicts}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(c.w.backlog.unfinished.Load()))
	age := 0.0
	if at := c.w.backlog.oldest.Load(); at != 0 {
		age = max(time.Since(time.Unix(0, at)).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
