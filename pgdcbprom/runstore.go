package pgdcbprom

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/runstore"
)

// runstoreMetrics is the runstore.Tracer (and ProjectorTracer) part of
// metrics: the State Store's pgdcb_runstore_….
type runstoreMetrics struct {
	used      atomic.Bool // a runstore traced: its series are collected
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
	_ runstore.Tracer          = (*runstoreMetrics)(nil)
	_ runstore.ProjectorTracer = (*runstoreMetrics)(nil)
)

// runstoreScrapeTimeout bounds each query a scrape of a watched runstore
// runs (Prometheus gives Collect no context).
const runstoreScrapeTimeout = 2 * time.Second

func newRunstoreMetrics() *runstoreMetrics {
	return &runstoreMetrics{
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
func (m *runstoreMetrics) TraceRunAppendStart(ctx context.Context, _ runstore.TraceData) context.Context {
	return ctx
}

// TraceRunAppendEnd implements runstore.Tracer.
func (m *runstoreMetrics) TraceRunAppendEnd(_ context.Context, d runstore.TraceData) {
	m.used.Store(true)
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
func (m *runstoreMetrics) TraceRunFetchStart(ctx context.Context, _ runstore.TraceData) context.Context {
	return ctx
}

// TraceRunFetchEnd implements runstore.Tracer.
func (m *runstoreMetrics) TraceRunFetchEnd(context.Context, runstore.TraceData) {
	m.used.Store(true)
}

// TraceProjected implements runstore.ProjectorTracer.
func (m *runstoreMetrics) TraceProjected(_ context.Context, events int, ahead bool) {
	m.used.Store(true)
	if ahead {
		m.ahead.Add(float64(events))
	} else {
		m.projected.Add(float64(events))
	}
}

// TraceResync implements runstore.ProjectorTracer.
func (m *runstoreMetrics) TraceResync(_ context.Context, _, trigger string) {
	m.used.Store(true)
	m.resyncs.WithLabelValues(trigger).Inc()
}

// TraceSnapshotLag implements runstore.ProjectorTracer.
func (m *runstoreMetrics) TraceSnapshotLag(_ context.Context, l runstore.Lag) {
	m.used.Store(true)
	m.setLag(l)
}

func (m *runstoreMetrics) setLag(l runstore.Lag) {
	m.lag.Set(l.Lag.Seconds())
	m.lagAlert.Set(b2f(l.Alert))
}

// runstoreStats is what WatchRunstore queries at scrape time:
// *runstore.Store implements it.
type runstoreStats interface {
	SnapshotLag(ctx context.Context) (runstore.Lag, error)
	StaleRunCount(ctx context.Context) (int64, error)
}

var _ runstoreStats = (*runstore.Store)(nil)

func (m *runstoreMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.appends, m.retries, m.projected, m.ahead, m.lag, m.lagAlert, m.threshold,
		m.scrapeErr, m.resyncs, m.stale}
}

// collect measures the lag gauges and the STALE-runs gauge from s (if not
// nil) at scrape time, not only by the projector, so PROJECTOR_LAG_HIGH
// fires when the projector is stopped or stuck; then it sends the series if
// a runstore was traced or watched.
func (m *runstoreMetrics) collect(ch chan<- prometheus.Metric, s runstoreStats) {
	if s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), runstoreScrapeTimeout)
		if l, err := s.SnapshotLag(ctx); err != nil {
			m.scrapeErr.Inc()
		} else {
			m.setLag(l)
		}
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), runstoreScrapeTimeout)
		if n, err := s.StaleRunCount(ctx); err != nil {
			m.scrapeErr.Inc()
		} else {
			m.stale.Set(float64(n))
		}
		cancel()
	} else if !m.used.Load() {
		return
	}
	m.threshold.Set(runstore.LagAlertThreshold.Seconds())
	for _, x := range m.collectors() {
		x.Collect(ch)
	}
}
