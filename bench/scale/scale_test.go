package main

import (
	"encoding/xml"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/tags"
)

func generate(spec stageSpec) []genEvent {
	g := newGenerator(spec)
	var out []genEvent
	for !g.done() {
		out = append(out, g.nextEvent())
	}
	return out
}

// The generated log has the shape the study promises: the exact count, the
// special entities exactly as large as the decision rows need, 2-4 tags in
// the store's canonical order, a few hundred types, many short entities and
// a few long ones; and the same spec gives the same log.
func TestGeneratedShape(t *testing.T) {
	spec := stageSpec{Stage: 1, From: 5000, Count: 100_000, Probes: 100, LongEvents: 5_000, Seed: 39}
	evs := generate(spec)
	require.Len(t, evs, int(spec.Count))

	perEntity := map[string]int{}
	types := map[string]int{}
	markers := 0
	for i, e := range evs {
		if len(e.Tags) < 2 || len(e.Tags) > 4 {
			t.Fatalf("event %d has %d tags, want 2-4: %v", i, len(e.Tags), e.Tags)
		}
		if i%10 == 0 {
			require.Equal(t, tags.MustParseSet(e.Tags...).Strings(), e.Tags, "event %d: tags not in canonical order", i)
		}
		types[e.Type]++
		if e.Type == markerType(1) {
			markers++
			continue
		}
		for _, tg := range e.Tags {
			if k, _, _ := strings.Cut(tg, "="); slices.Contains([]string{"account", "order", "cart", "device", "invoice", "ticket", "shipment", "session"}, k) {
				perEntity[tg]++
			}
		}
	}
	require.Equal(t, spec.markers(), markers)
	for i := range spec.Probes {
		require.Equal(t, probeEvents, perEntity[probeTag(1, i)], "probe %d", i)
	}
	require.Equal(t, spec.LongEvents, perEntity[longTag(1, "off")])
	require.Equal(t, spec.LongEvents, perEntity[longTag(1, "on")])
	require.GreaterOrEqual(t, len(types), 200, "a few hundred types")
	require.LessOrEqual(t, len(types), 400)

	// A probe's events are spread over the stage, its first is E00, its
	// last (ReadLast's self-check) E09.
	var first, last = -1, -1
	for i, e := range evs {
		if slices.Contains(e.Tags, probeTag(1, 0)) {
			if first < 0 {
				require.Equal(t, "AccountE00", e.Type)
				first = i
			}
			last = i
		}
	}
	require.Equal(t, "AccountE09", evs[last].Type)
	require.Greater(t, last-first, int(spec.Count)/10, "a probe's 10 events spread over the stage")

	// Background entities: many short, a few long. A long one is spread
	// over far more than one stage of this size (one event per pick among
	// activePool entities), so the drawn sizes are checked, and the log
	// holds many entities.
	var sizes []int
	g := newGenerator(spec)
	for range 100_000 {
		sizes = append(sizes, g.entitySize())
	}
	sort.Ints(sizes)
	require.LessOrEqual(t, sizes[len(sizes)/2], 10, "the median entity is short")
	long := len(sizes) - sort.SearchInts(sizes, 200)
	require.Greater(t, long, 200, "some entities are long")
	require.Less(t, long, 1000, "a few")
	require.LessOrEqual(t, sizes[len(sizes)-1], 5000)
	require.Greater(t, len(perEntity), 5000)

	again := newGenerator(spec)
	for i := range 1000 {
		require.Equal(t, evs[i], again.nextEvent(), "the same spec generates the same log (event %d)", i)
	}
}

// A small stage still places every special event: when the specials crowd
// the end, they take the last slots.
func TestGeneratedSmallStage(t *testing.T) {
	spec := stageSpec{Count: 1000, Probes: 50, LongEvents: 240, Seed: 1} // 990 special events of 1000
	evs := generate(spec)
	require.Len(t, evs, 1000)
	n := 0
	for _, e := range evs {
		if strings.HasPrefix(e.Tags[0], "account=p") || strings.HasPrefix(e.Tags[0], "account=L") {
			n++
		}
	}
	require.Equal(t, 50*probeEvents+2*240, n)
}

func sampleResults() []*SizeResult {
	mk := func(n int64, dec, ratio float64) *SizeResult {
		return &SizeResult{Run: "validation", Date: "2026-11-29 06:00 UTC", Machine: "2 CPUs", Events: n,
			DecisionP50Ms: dec, DecisionP99Ms: 2 * dec, DecisionWarmP50Ms: dec / 2, DecisionWarmP99Ms: dec, DecisionLongP50Ms: 3, DecisionLongNoSnapP50Ms: 30, LongEntityEvents: 10_000,
			Appends:       []AppendRow{{Writers: 1, Ratio: 0.9}, {Writers: 8, Ratio: ratio}, {Writers: 32, Ratio: 1.1}},
			AppendRatioW8: ratio, ReadLastP50Ms: 0.3, TypeStreamP50Ms: 5, CatchupEventsPerS: 50000,
			TableBytes: n * 200, IndexBytes: n * 180, BytesPerEvent: 380, LoadEventsPerS: 12000,
			Table: map[string]any{"autovacuum_count": 1}, LoadBgwriter: map[string]int64{"checkpoints_timed": 2}}
	}
	return []*SizeResult{mk(10_000, 1, 0.5), mk(100_000, 1.2, 0.45), mk(1_000_000, 1.4, 0.4)}
}

// The report: a validation run says so, one row per size with the figures,
// rows without spaces (docs/ counts words), and the chart is well-formed
// SVG with a line per cost.
func TestReportRendering(t *testing.T) {
	rs := sampleResults()
	md := markdown(rs, "../bench/scale/scale.svg")
	require.Contains(t, md, "**Validation run** (10k, 100k, 1M events)")
	require.Contains(t, md, "|1M|1.40/2.80|0.70/1.40|0.0/0.0|10000|3.00/0.00|30.0/0.0|0.90/0.40/1.10|")
	require.Contains(t, md, "|100k|19M|17M|380|12000|0.0|1|2/0|")
	require.Contains(t, md, "](../bench/scale/scale.svg)")
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "|") && !strings.HasPrefix(line, "|events") {
			require.NotContains(t, line, " ", "a table row with spaces: %q", line)
		}
	}
	rs[2].Run = "study"
	require.NotContains(t, markdown(rs, ""), "Validation")

	svg := chartSVG(rs)
	d := xml.NewDecoder(strings.NewReader(svg))
	lines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	require.Equal(t, len(series), lines)
	require.Contains(t, svg, "1.5× target")
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--sizes", "10000,100000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []int64{10_000, 100_000}, o.sizes)
	_, err = parseFlags([]string{"--sizes", "100000,10000"}, io.Discard)
	require.ErrorContains(t, err, "must grow")
	_, err = parseFlags([]string{"--sizes", "5000"}, io.Discard)
	require.Error(t, err)
	_, err = parseFlags([]string{"--reps", "2"}, io.Discard)
	require.Error(t, err)
}

// The disk check stops the study when what is left to load (with the
// margin) and the reserve do not fit, naming both.
func TestDiskCheckStopsWhenShort(t *testing.T) {
	d := &disk{dir: t.TempDir(), reserve: 1 << 20}
	free, err := d.free()
	require.NoError(t, err)
	_, _, err = d.check(free/400+1, 400) // ×1.3 of just over the free space
	require.ErrorIs(t, err, errDiskShort)
	require.ErrorContains(t, err, "bytes each")
	need, _, err := d.check(1000, 400)
	require.NoError(t, err)
	require.Equal(t, int64(1000*400*diskMargin)+d.reserve, need)
	_, err = (&disk{dir: "/nonexistent/pgdata"}).free()
	require.ErrorContains(t, err, "--disk-check=false")
}
