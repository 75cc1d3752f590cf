package pgdcbprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/effects"
)

// effectsWorker is what WatchEffects reads at scrape time: *effects.Worker
// implements it.
type effectsWorker interface {
	Identity() string
	Stats() effects.Stats
	Backlog() effects.Backlog
}

var _ effectsWorker = (*effects.Worker)(nil)

// effectsCollector exports effect workers' counters (Worker.Stats) as
// pgdcb_effects_…_total, and the unfinished effects each knew of at its last
// look at the log (Worker.Backlog) as pgdcb_effects_backlog and
// pgdcb_effects_oldest_unfinished_seconds (every worker of a store sees the
// same effects, so take the max over workers). Each series carries the label
// worker (effects.Config.Identity). It reads memory when scraped: no query.
type effectsCollector struct {
	claims, executed, failed, retried, takeovers, lost, extended, conflicts *prometheus.Desc
	backlog, oldest                                                         *prometheus.Desc
}

func newEffectsCollector() *effectsCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("pgdcb", "effects", name), help, []string{"worker"}, nil)
	}
	return &effectsCollector{
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

func (c *effectsCollector) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.claims, c.executed, c.failed, c.retried, c.takeovers, c.lost,
		c.extended, c.conflicts, c.backlog, c.oldest} {
		ch <- d
	}
}

// collect sends w's series, labelled with its identity.
func (c *effectsCollector) collect(ch chan<- prometheus.Metric, w effectsWorker) {
	id := w.Identity()
	s := w.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		v int64
	}{{c.claims, s.Claims}, {c.executed, s.Executed}, {c.failed, s.Failed}, {c.retried, s.Retried},
		{c.takeovers, s.LeaseTakeovers}, {c.lost, s.LostLeases}, {c.extended, s.LeaseExtensions}, {c.conflicts, s.ClaimConflicts}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v), id)
	}
	b := w.Backlog()
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(b.Unfinished), id)
	age := 0.0
	if !b.OldestRequestedAt.IsZero() {
		age = max(time.Since(b.OldestRequestedAt).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, id)
}
