package pgdcbprom

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/eventstore"
)

// storeStats is what WatchStore reads from a store at scrape time:
// *eventstore.Store implements it.
type storeStats interface {
	GroupStats() eventstore.GroupStats
	SettleStats() eventstore.SettleStats
}

var _ storeStats = (*eventstore.Store)(nil)

// storeCollector exports a store's group-commit and settle counters
// (Store.GroupStats, Store.SettleStats) as pgdcb_store_group_…,
// pgdcb_store_settle_… and pgdcb_store_{dead_connections,sends_repeated}_total.
// It reads the counters in memory when the registry is scraped: no query, no
// cost between scrapes.
type storeCollector struct {
	commits, appends, queueWait, settled, terminated, deadConns, notSent *prometheus.Desc
}

func newStoreCollector() *storeCollector {
	name := func(n string) string { return prometheus.BuildFQName("pgdcb", "store", n) }
	return &storeCollector{
		commits: prometheus.NewDesc(name("group_commits_total"),
			"Transactions the group committer sent that carried appends, by kind: group (two or more appends) or alone.",
			[]string{"kind"}, nil),
		appends: prometheus.NewDesc(name("group_appends_total"),
			"Appends the group committer handled, by how: grouped, alone, retried (alone, after their group's transaction failed), busy (left their group unsent because a key was held by another transaction, then sent alone to wait for it), requeued (put back unsent after their sender's connection was lost).",
			[]string{"how"}, nil),
		queueWait: prometheus.NewDesc(name("group_queue_wait_seconds"),
			"Time appends waited in the group committer's queue before a sender took them (appends sent at once by their caller are not observed).",
			nil, nil),
		settled: prometheus.NewDesc(name("settle_total"),
			"Calls whose outcome was unknown when their send failed, by what settling found: present (committed; the caller got its result), absent (not committed), resent (absent and sent again), unknown (the settle budget ran out: the caller got ErrOutcomeUnknown).",
			[]string{"result"}, nil),
		terminated: prometheus.NewDesc(name("settle_terminated_backends_total"),
			"Server backends the store terminated while settling, so that an old send can no longer commit.",
			nil, nil),
		deadConns: prometheus.NewDesc(name("dead_connections_total"),
			"Pooled connections found dead when the store took them for an append (a server restart, a terminated backend) and replaced before anything was sent.",
			nil, nil),
		notSent: prometheus.NewDesc(name("sends_repeated_total"),
			"Sends that failed before anything left the client and were sent again on a fresh connection, without settling.",
			nil, nil),
	}
}

func (c *storeCollector) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.commits, c.appends, c.queueWait, c.settled, c.terminated, c.deadConns, c.notSent} {
		ch <- d
	}
}

// collect sends s's counters.
func (c *storeCollector) collect(ch chan<- prometheus.Metric, s storeStats) {
	g, st := s.GroupStats(), s.SettleStats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.commits, g.Groups, "group")
	counter(c.commits, g.Alone, "alone")
	counter(c.appends, g.Grouped, "grouped")
	counter(c.appends, g.Alone, "alone")
	counter(c.appends, g.Retried, "retried")
	counter(c.appends, g.Busy, "busy")
	counter(c.appends, g.Requeued, "requeued")
	counter(c.settled, st.Present, "present")
	counter(c.settled, st.Absent, "absent")
	counter(c.settled, st.Resent, "resent")
	counter(c.settled, st.Unknown, "unknown")
	counter(c.terminated, st.Terminated)
	counter(c.deadConns, st.DeadConns)
	counter(c.notSent, st.NotSent)

	buckets := make(map[float64]uint64, len(g.QueueWaits))
	var cum uint64
	for _, b := range g.QueueWaits {
		cum += uint64(b.Count)
		if b.Max == math.MaxInt64 {
			continue // +Inf: the histogram's count
		}
		buckets[b.Max.Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(c.queueWait, uint64(g.Queued), g.QueueWait.Seconds(), buckets)
}
