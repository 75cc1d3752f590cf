package runstore

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the store's Prometheus metrics, named pgdcb_runstore_…
// (docs/METRICS.md); register the store's Collectors yourself (nothing is
// registered globally):
//
//	for _, c := range store.Collectors() {
//		registry.MustRegister(c)
//	}
type Metrics struct {
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

	// lagOf measures the lag from the store at scrape time (nil in tests of
	// the metrics alone).
	lagOf func(context.Context) (Lag, error)
	// staleOf counts the STALE runs at scrape time (nil likewise).
	staleOf func(context.Context) (int64, error)
}

// scrapeTimeout bounds the lag query a scrape runs.
const scrapeTimeout = 2 * time.Second

var _ prometheus.Collector = (*Metrics)(nil)

func newMetrics() *Metrics {
	return &Metrics{
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

func (m *Metrics) setLag(l Lag) {
	m.lag.Set(l.Lag.Seconds())
	if l.Alert {
		m.lagAlert.Set(1)
	} else {
		m.lagAlert.Set(0)
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.appends.Describe(ch)
	m.retries.Describe(ch)
	m.projected.Describe(ch)
	m.ahead.Describe(ch)
	m.lag.Describe(ch)
	m.lagAlert.Describe(ch)
	m.threshold.Describe(ch)
	m.scrapeErr.Describe(ch)
	m.resyncs.Describe(ch)
	m.stale.Describe(ch)
}

// Collect implements prometheus.Collector.
//
// The lag gauges are measured from the store at scrape time, not only by the
// projector, so PROJECTOR_LAG_HIGH fires when the projector is stopped or
// stuck. Prometheus gives Collect no context: the query runs under its own
// timeout of two seconds.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if m.lagOf != nil {
		ctx, cancel := context.WithTimeout(context.TODO(), scrapeTimeout)
		if _, err := m.lagOf(ctx); err != nil { // sets the gauges
			m.scrapeErr.Inc()
		}
		cancel()
	}
	if m.staleOf != nil {
		ctx, cancel := context.WithTimeout(context.TODO(), scrapeTimeout)
		if n, err := m.staleOf(ctx); err != nil {
			m.scrapeErr.Inc()
		} else {
			m.stale.Set(float64(n))
		}
		cancel()
	}
	m.threshold.Set(LagAlertThreshold.Seconds())
	m.appends.Collect(ch)
	m.retries.Collect(ch)
	m.projected.Collect(ch)
	m.ahead.Collect(ch)
	m.lag.Collect(ch)
	m.lagAlert.Collect(ch)
	m.threshold.Collect(ch)
	m.scrapeErr.Collect(ch)
	m.resyncs.Collect(ch)
	m.stale.Collect(ch)
}

// Collectors returns the store's Prometheus collectors, for the caller to
// register.
func (s *Store) Collectors() []prometheus.Collector { return []prometheus.Collector{s.metrics} }
