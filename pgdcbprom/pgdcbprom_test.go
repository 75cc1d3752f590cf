package pgdcbprom_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/tracescenario"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/runstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// gather returns each series' value (a histogram's sample count), keyed by
// its name and label values: "name{v1,v2}".
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetValue()
			}
			key += "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// The tracer's metrics count a real append, conflict, idempotent refusal,
// invalid append and the reads, by outcome.
func TestMetricsOfARealStore(t *testing.T) {
	t.Parallel()
	tr := pgdcbprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(tr))
	s := tracescenario.Store(t, tr)
	tracescenario.Run(t, s)

	got := gather(t, reg)
	want := map[string]float64{
		"pgdcb_store_append_duration_seconds{committed}":        tracescenario.Committed,
		"pgdcb_store_append_duration_seconds{condition_failed}": tracescenario.ConditionFailed,
		"pgdcb_store_append_duration_seconds{idempotent}":       tracescenario.Idempotent,
		"pgdcb_store_append_duration_seconds{invalid}":          tracescenario.Invalid,
		"pgdcb_store_append_conflicts_total{}":                  tracescenario.ConditionFailed,
		"pgdcb_store_append_idempotent_total{}":                 tracescenario.Idempotent,
		"pgdcb_store_events_appended_total{}":                   tracescenario.EventsAppended,
		"pgdcb_store_appends_grouped_total{}":                   0,
		"pgdcb_store_append_group_size{}":                       0,
		"pgdcb_store_append_check_items_total{}":                tracescenario.CheckItems,
		"pgdcb_store_read_duration_seconds{project,ok}":         1,
		"pgdcb_store_read_duration_seconds{head,ok}":            1,
		"pgdcb_store_read_duration_seconds{read,ok}":            1,
		"pgdcb_store_events_read_total{project}":                tracescenario.ProjectEvents,
		"pgdcb_store_events_read_total{read}":                   tracescenario.ReadEvents,
	}
	require.Equal(t, want, got)
}

// Collectors can be registered twice under different labels (one registry,
// two stores), and a second New gives collectors of its own.
func TestCollectorsWrapped(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	for i, tr := range []pgdcbprom.Metrics{pgdcbprom.New(), pgdcbprom.New()} {
		r := prometheus.WrapRegistererWith(prometheus.Labels{"store": string(rune('a' + i))}, reg)
		require.NoError(t, r.Register(tr))
	}
	_, err := reg.Gather()
	require.NoError(t, err)
}

// A grouped append observes its group's size; an append sent alone does not.
func TestGroupSize(t *testing.T) {
	t.Parallel()
	tr := pgdcbprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(tr))
	for _, n := range []int{0, 3, 5} {
		tr.TraceAppendEnd(t.Context(), eventstore.TraceAppendEndData{Outcome: eventstore.OutcomeCommitted,
			Events: 1, Grouped: n > 0, GroupSize: n})
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "pgdcb_store_append_group_size" {
			found = true
			h := mf.GetMetric()[0].GetHistogram()
			require.Equal(t, uint64(2), h.GetSampleCount())
			require.Equal(t, 8.0, h.GetSampleSum())
		}
	}
	require.True(t, found, "pgdcb_store_append_group_size gathered")
	require.Equal(t, 2.0, gather(t, reg)["pgdcb_store_appends_grouped_total{}"])
}

// One Metrics registers once and exports only the components that reported:
// a registry of an application using the executor alone holds no
// pgdcb_store_… or pgdcb_runstore_… series.
func TestMetricsExportOnlyWhatReports(t *testing.T) {
	t.Parallel()
	m := pgdcbprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	require.Empty(t, gather(t, reg))

	m.TraceExecuteEnd(t.Context(), commands.TraceExecuteData{Type: "Open", Result: commands.ResultExecuted, Attempts: 1})
	for name := range gather(t, reg) {
		require.True(t, strings.HasPrefix(name, "pgdcb_commands_"), name)
	}
	m.TraceRunAppendEnd(t.Context(), runstore.TraceData{})
	require.Contains(t, gather(t, reg), "pgdcb_runstore_append_retries_total{}")
	require.NotContains(t, gather(t, reg), "pgdcb_store_append_conflicts_total{}")
}
