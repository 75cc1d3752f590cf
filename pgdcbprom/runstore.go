package pgdcbprom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/runstore"
)

// RunstoreMetrics is a runstore.Tracer (and ProjectorTracer) recording the
// State Store's metrics, pgdcb_runstore_… (docs/METRICS.md). Set it as
// runstore.Config.Tracer, then register its collectors with the store, whose
// projector lag and STALE runs are measured at scrape time:
//
//	m := pgdcbprom.NewRunstoreMetrics()
//	rs, err := runstore.New(store, &runstore.Config{Tracer: m})
//	…
//	registry.MustRegister(m.Collectors(rs)...)
type RunstoreMetrics struct {
	appends   *prometheus.CounterVec
	retries   prometheus.Counter
	projected prometheus.Counter
	ahead     prometheus.Counter
	lag       prometheus.Gauge
	lagAlert  prometheus.Gauge
	threshold prometheus.Gauge
	scrapeErr prometheus.Counter
	resyncs   *prometheus.CounterVec
	stale     prometheus.Gauge
}

var (
	_ runstore.Tracer          = (*RunstoreMetrics)(nil)
	_ runstore.ProjectorTracer = (*RunstoreMetrics)(nil)
)

// RunstoreScrapeTimeout bounds each query a scrape of the runstore collector
// runs (Prometheus gives Collect no context).
const RunstoreScrapeTimeout = 2 * time.Second

// NewRunstoreMetrics returns the State Store's metrics.
func NewRunstoreMetrics() *RunstoreMetrics {
	return &RunstoreMetrics{
		appends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdcb_runstore_appends_total",
			Help: "AppendEvent calls that returned a runSeq, by result (persisted, idempotent).",
		}, []string{"result"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgdcb_runstore_append_retries_total",
			Help: "AppendEvent attempts that lost the race for a run's next runSeq (or had a stale hint) and retried.",
		}),
		projected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgdcb_runstore_projector_events_total",
			Help: "Run events the snapshot projector has read below the horizon (it reads no other event of the log).",
		}),
		ahead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgdcb_runstore_projector_ahead_events_total",
			Help: "Run events the snapshot projector read beyond a held horizon to extend runs' snapshots contiguously.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgdcb_runstore_projector_lag_seconds",
			Help: "Age of the oldest committed event the snapshot projector has not projected (0 when caught up). Contract: <= 1 s in normal operation.",
		}),
		lagAlert: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgdcb_runstore_projector_lag_high",
			Help: "1 when the projector lag is above the contract's alert threshold (PROJECTOR_LAG_HIGH, > 5 s), else 0.",
		}),
		scrapeErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgdcb_runstore_projector_lag_scrape_errors_total",
			Help: "Scrapes whose lag or STALE-runs query failed (the gauges then keep their last value).",
		}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdcb_runstore_projector_resyncs_total",
			Help: "Runs whose snapshot the projector rebuilt from their events after marking them STALE, by trigger (gap, fill: a non-contiguous observation; lag: behind by more than Config.ResyncLag).",
		}, []string{"trigger"}),
		stale: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgdcb_runstore_stale_runs",
			Help: "Runs marked STALE (their snapshot awaits a resync), measured at scrape time.",
		}),
		threshold: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgdcb_runstore_projector_lag_alert_threshold_seconds",
			Help: "The contract's projector lag alert threshold (PROJECTOR_LAG_HIGH).",
		}),
	}
}

// TraceRunAppendStart implements runstore.Tracer.
func (m *RunstoreMetrics) TraceRunAppendStart(ctx context.Context, _ runstore.TraceRunAppendStartData) context.Context {
	return ctx
}

// TraceRunAppendEnd implements runstore.Tracer.
func (m *RunstoreMetrics) TraceRunAppendEnd(_ context.Context, d runstore.TraceRunAppendEndData) {
	if d.Retries > 0 {
		m.retries.Add(float64(d.Retries))
	}
	if d.Err != nil {
		return
	}
	switch {
	case d.Result.Persisted:
		m.appends.WithLabelValues("persisted").Inc()
	case d.Result.Idempotent:
		m.appends.WithLabelValues("idempotent").Inc()
	}
}

// TraceRunFetchStart implements runstore.Tracer.
func (m *RunstoreMetrics) TraceRunFetchStart(ctx context.Context, _ runstore.TraceRunFetchStartData) context.Context {
	return ctx
}

// TraceRunFetchEnd implements runstore.Tracer.
func (m *RunstoreMetrics) TraceRunFetchEnd(context.Context, runstore.TraceRunFetchEndData) {}

// TraceProjected implements runstore.ProjectorTracer.
func (m *RunstoreMetrics) TraceProjected(_ context.Context, events int, ahead bool) {
	if ahead {
		m.ahead.Add(float64(events))
	} else {
		m.projected.Add(float64(events))
	}
}

// TraceResync implements runstore.ProjectorTracer.
func (m *RunstoreMetrics) TraceResync(_ context.Context, _, trigger string) {
	m.resyncs.WithLabelValues(trigger).Inc()
}

// TraceSnapshotLag implements runstore.ProjectorTracer.
func (m *RunstoreMetrics) TraceSnapshotLag(_ context.Context, l runstore.Lag) { m.setLag(l) }

func (m *RunstoreMetrics) setLag(l runstore.Lag) {
	m.lag.Set(l.Lag.Seconds())
	m.lagAlert.Set(b2f(l.Alert))
}

// RunstoreStats is what the runstore collector queries at scrape time:
// *runstore.Store implements it.
type RunstoreStats interface {
	SnapshotLag(ctx context.Context) (runstore.Lag, error)
	StaleRunCount(ctx context.Context) (int64, error)
}

var _ RunstoreStats = (*runstore.Store)(nil)

// Collectors returns the collectors, for the caller to register: one whose
// lag gauges and STALE-runs gauge are measured from s at scrape time, not
// only by the projector, so PROJECTOR_LAG_HIGH fires when the projector is
// stopped or stuck (each query under RunstoreScrapeTimeout). Pass the store
// whose Config.Tracer is m.
func (m *RunstoreMetrics) Collectors(s RunstoreStats) []prometheus.Collector {
	return []prometheus.Collector{&runstoreCollector{m: m, s: s}}
}

type runstoreCollector struct {
	m *RunstoreMetrics
	s RunstoreStats
}

func (c *runstoreCollector) all() []prometheus.Collector {
	m := c.m
	return []prometheus.Collector{m.appends, m.retries, m.projected, m.ahead, m.lag, m.lagAlert, m.threshold,
		m.scrapeErr, m.resyncs, m.stale}
}

// Describe implements prometheus.Collector.
func (c *runstoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range c.all() {
		x.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *runstoreCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	if c.s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), RunstoreScrapeTimeout)
		if l, err := c.s.SnapshotLag(ctx); err != nil {
			m.scrapeErr.Inc()
		} else {
			m.setLag(l)
		}
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), RunstoreScrapeTimeout)
		if n, err := c.s.StaleRunCount(ctx); err != nil {
			m.scrapeErr.Inc()
		} else {
			m.stale.Set(float64(n))
		}
		cancel()
	}
	m.threshold.Set(runstore.LagAlertThreshold.Seconds())
	for _, x := range c.all() {
		x.Collect(ch)
	}
}
