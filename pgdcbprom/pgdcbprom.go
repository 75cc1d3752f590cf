// Package pgdcbprom turns what pgdcb's components report through their
// Tracer interfaces into Prometheus metrics; it is the only package of the
// module that imports the Prometheus client. New returns one Metrics: set it
// as the Tracer of every component, hand it the objects whose counters are
// read at scrape time, and register it (nothing is registered globally):
//
//	m := pgdcbprom.New()
//	registry.MustRegister(m)
//	store, err := eventstore.New(pool, &eventstore.Config{Tracer: m})
//	m.WatchStore(store)
//	exec, err := commands.New(store, &commands.Config{Tracer: m})
//
// The Config fields it goes in, and the metrics it makes (docs/METRICS.md
// lists them): eventstore.Config.Tracer (pgdcb_store_…); the Tracer of
// subscriptions, projections, outbox relays and the runstore's snapshot
// projector (subscription.Config.Tracer, projection.ReaderConfig.Tracer:
// pgdcb_reader_…, labelled by reader name); outbox.Config.DeliveryTracer
// (pgdcb_outbox_…); commands.Config.Tracer (pgdcb_commands_…);
// runstore.Config.Tracer (pgdcb_runstore_…). A component's series appear once
// it reports. The effect workers' pgdcb_effects_… (label worker) are read from
// each worker given to WatchEffects.
//
// A Metrics serves one store: for several stores in one registry, give each
// its own Metrics, registered through prometheus.WrapRegistererWith with a
// label telling them apart. Combine it with other tracers (package pgdcbotel)
// with the component's MultiTracer (eventstore.MultiTracer,
// commands.MultiTracer, …).
//
// Only the importers of this package depend on the Prometheus client; the
// components do not.
package pgdcbprom

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/subscription"
)

// Metrics is every component's Tracer (with the optional interfaces
// subscription.StatusTracer, outbox.RelayTracer and runstore.ProjectorTracer)
// recording Prometheus metrics, and the prometheus.Collector exporting them.
// It is safe for concurrent use, and one Metrics serves any number of
// readers, relays and executors.
type Metrics interface {
	prometheus.Collector
	eventstore.Tracer
	subscription.Tracer
	subscription.StatusTracer
	outbox.Tracer
	outbox.RelayTracer
	commands.Tracer
	runstore.Tracer
	runstore.ProjectorTracer

	// WatchStore exports the group-commit and settle counters of s (an
	// *eventstore.Store: Store.GroupStats, Store.SettleStats) as
	// pgdcb_store_group_…, pgdcb_store_settle_…,
	// pgdcb_store_dead_connections_total and
	// pgdcb_store_sends_repeated_total, read in memory at scrape time.
	// Watching again replaces s.
	WatchStore(s storeStats)
	// WatchEffects exports the counters and backlog of w (an
	// *effects.Worker: Worker.Stats, Worker.Backlog) as pgdcb_effects_…,
	// labelled worker with w.Identity(), read in memory at scrape time. Call
	// it once per worker; a worker of the same identity replaces the
	// previous one.
	WatchEffects(w effectsWorker)
	// WatchRunstore measures the projector lag and the STALE runs of s (a
	// *runstore.Store) at each scrape, so that PROJECTOR_LAG_HIGH fires even
	// when the projector is stopped or stuck (each query bounded by 2s).
	// Pass the store whose Config.Tracer is the Metrics; watching again
	// replaces s.
	WatchRunstore(s runstoreStats)
}

// New returns a Metrics, to register and set in the components' Configs.
func New() Metrics {
	return &metrics{
		storeTracer:     newStoreTracer(),
		readerMetrics:   newReaderMetrics(),
		outboxMetrics:   newOutboxMetrics(),
		commandsMetrics: newCommandsMetrics(),
		runstoreMetrics: newRunstoreMetrics(),
		storeStats:      newStoreCollector(),
		effects:         newEffectsCollector(),
		workers:         map[string]effectsWorker{},
	}
}

// metrics implements Metrics: each embedded part implements one component's
// Tracer.
type metrics struct {
	*storeTracer
	*readerMetrics
	*outboxMetrics
	*commandsMetrics
	*runstoreMetrics
	storeStats *storeCollector
	effects    *effectsCollector

	mu       sync.Mutex
	store    storeStats
	runstore runstoreStats
	workers  map[string]effectsWorker // by identity
}

func (m *metrics) WatchStore(s storeStats) {
	m.mu.Lock()
	m.store = s
	m.mu.Unlock()
}

func (m *metrics) WatchEffects(w effectsWorker) {
	m.mu.Lock()
	m.workers[w.Identity()] = w
	m.mu.Unlock()
}

func (m *metrics) WatchRunstore(s runstoreStats) {
	m.mu.Lock()
	m.runstore = s
	m.mu.Unlock()
}

// Describe implements prometheus.Collector: every series the Metrics may
// export, whether or not its component reports.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.plain() {
		c.Describe(ch)
	}
	m.storeStats.describe(ch)
	m.outboxMetrics.describe(ch)
	m.effects.describe(ch)
}

// plain returns the collectors of the components' Tracer parts.
func (m *metrics) plain() []prometheus.Collector {
	var cs []prometheus.Collector
	for _, part := range [][]prometheus.Collector{m.storeTracer.collectors(), m.readerMetrics.collectors(),
		m.commandsMetrics.collectors(), m.runstoreMetrics.collectors()} {
		cs = append(cs, part...)
	}
	return cs
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	store, rs := m.store, m.runstore
	workers := make([]effectsWorker, 0, len(m.workers))
	for _, w := range m.workers {
		workers = append(workers, w)
	}
	m.mu.Unlock()

	if m.storeTracer.used.Load() {
		for _, c := range m.storeTracer.collectors() {
			c.Collect(ch)
		}
	}
	if store != nil {
		m.storeStats.collect(ch, store)
	}
	for _, c := range m.readerMetrics.collectors() {
		c.Collect(ch)
	}
	m.outboxMetrics.collect(ch)
	for _, c := range m.commandsMetrics.collectors() {
		c.Collect(ch)
	}
	m.runstoreMetrics.collect(ch, rs)
	for _, w := range workers {
		m.effects.collect(ch, w)
	}
}
