package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
)

// SizeResult is one log size's measurements: one object of
// bench/scale/results.json (a list, one per size, in the order measured).
// Latencies are milliseconds (nearest-rank percentiles), rates per second.
type SizeResult struct {
	// Run is "study" when the run reached 10^8 events, else "validation".
	Run     string `json:"run"`
	Date    string `json:"date"`
	Machine string `json:"machine"`
	// Events is the log's size when the measurements started.
	Events int64 `json:"events"`
	// LoadAvg is /proc/loadavg's 1-minute figure when the measurements
	// started: what else the machine was doing.
	LoadAvg float64 `json:"loadavg,omitempty"`

	LoadedEvents    int64   `json:"loaded_events"`
	LoadSeconds     float64 `json:"load_seconds"`
	LoadEventsPerS  float64 `json:"load_events_per_s"`
	LoadTxEvents    int     `json:"load_tx_events"`
	LoadServerCPU   float64 `json:"load_server_cpu_seconds"`
	LoadClientCPU   float64 `json:"load_client_cpu_seconds"`
	StageXids       int64   `json:"stage_transaction_ids"`
	IndexBuildSecs  float64 `json:"index_rebuild_seconds,omitempty"`
	VacuumSeconds   float64 `json:"vacuum_seconds"`
	BytesPerEvent   float64 `json:"bytes_per_event"`
	FreeBytesBefore int64   `json:"free_bytes_before,omitempty"`

	DecisionP50Ms   float64 `json:"decision_p50_ms"`
	DecisionP99Ms   float64 `json:"decision_p99_ms"`
	DecisionSamples int     `json:"decision_samples"`
	// The same decisions again right after (the entity now has 11 events),
	// and the blocks each pass read from outside shared buffers per
	// decision.
	DecisionWarmP50Ms       float64 `json:"decision_warm_p50_ms"`
	DecisionWarmP99Ms       float64 `json:"decision_warm_p99_ms"`
	DecisionBlocksRead      float64 `json:"decision_blocks_read"`
	DecisionWarmBlocksRead  float64 `json:"decision_warm_blocks_read"`
	DecisionLongP50Ms       float64 `json:"decision_long_p50_ms"`
	DecisionLongP99Ms       float64 `json:"decision_long_p99_ms"`
	DecisionLongNoSnapP50Ms float64 `json:"decision_long_nosnap_p50_ms"`
	DecisionLongNoSnapP99Ms float64 `json:"decision_long_nosnap_p99_ms"`
	DecisionLongSamples     int     `json:"decision_long_samples"`
	LongEntityEvents        int     `json:"long_entity_events"`

	Appends       []AppendRow `json:"appends"`
	AppendRatioW8 float64     `json:"append_ratio_w8"`

	ReadLastP50Ms     float64 `json:"readlast_p50_ms"`
	ReadLastP99Ms     float64 `json:"readlast_p99_ms"`
	TypeStreamEvents  int     `json:"type_stream_events"`
	TypeStreamP50Ms   float64 `json:"type_stream_p50_ms"`
	TypeStreamP99Ms   float64 `json:"type_stream_p99_ms"`
	CatchupEvents     int64   `json:"catchup_events"`
	CatchupEventsPerS float64 `json:"catchup_events_per_s"`
	TailSamples       int     `json:"tail_samples"`
	TailP50Ms         float64 `json:"tail_p50_ms"`
	TailP99Ms         float64 `json:"tail_p99_ms"`
	TailError         string  `json:"tail_error,omitempty"`

	// Ops are steps of a user's life on the live log (ops.go); the base
	// backup is what a new standby copies.
	Ops               []OpRow `json:"ops"`
	BaseBackupSeconds float64 `json:"base_backup_seconds"`
	BaseBackupBytes   int64   `json:"base_backup_bytes"`
	BaseBackupError   string  `json:"base_backup_error,omitempty"`

	TableBytes int64            `json:"table_bytes"`
	IndexBytes int64            `json:"index_bytes"`
	ToastBytes int64            `json:"toast_bytes"`
	Indexes    map[string]int64 `json:"indexes"`

	// Table is pg_stat_user_tables of events after the measurements;
	// LoadBgwriter and MeasureBgwriter the change of pg_stat_bgwriter
	// (server-wide) over the stage's load and over its measurements.
	Table           map[string]any   `json:"pg_stat_user_tables"`
	LoadBgwriter    map[string]int64 `json:"bgwriter_load"`
	MeasureBgwriter map[string]int64 `json:"bgwriter_measure"`
}

// AppendRow is Append of one event at Writers writers against the floor.
type AppendRow struct {
	Writers         int     `json:"writers"`
	EventsPerS      float64 `json:"events_per_s"`
	FloorEventsPerS float64 `json:"floor_events_per_s"`
	Ratio           float64 `json:"ratio"`
	P50Ms           float64 `json:"p50_ms"`
	P99Ms           float64 `json:"p99_ms"`
}

func writeJSON(file string, rs []*SizeResult) error {
	raw, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(raw, '\n'), 0o644)
}

func readJSON(file string) ([]*SizeResult, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var rs []*SizeResult
	if err := json.Unmarshal(raw, &rs); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", file, err)
	}
	return rs, nil
}

func sizeName(n int64) string {
	switch {
	case n >= 1e9 && n%1e9 == 0:
		return fmt.Sprintf("%dG", n/1e9)
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%dM", n/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return fmt.Sprint(n)
}

func mib(b int64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.0fG", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.0fM", float64(b)/(1<<20))
}

// markdown renders docs/SCALE.md. Table rows carry no spaces: the page is
// generated, and docs/ counts words (docs_test.go).
func markdown(rs []*SizeResult, chart string) string {
	var b strings.Builder
	b.WriteString("# Cost against log size\n\n")
	if len(rs) == 0 {
		b.WriteString("No results.\n")
		return b.String()
	}
	var names []string
	for _, r := range rs {
		names = append(names, sizeName(r.Events))
	}
	if rs[len(rs)-1].Run != "study" {
		fmt.Fprintf(&b, "**Validation run** (%s events): it checks the program, it is not the study (`make scale`: 1M, 10M, 100M).\n\n", strings.Join(names, ", "))
	}
	fmt.Fprintf(&b, "Generated by `bench/scale` (method: its package doc) on %s, %s. One schema grown through each size; ms are p50/p99.\n\n", rs[0].Date, rs[0].Machine)
	var loads []string
	for i, r := range rs {
		loads = append(loads, fmt.Sprintf("%s %.1f", names[i], r.LoadAvg))
	}
	fmt.Fprintf(&b, "Load average when each size's measurements started (2 CPUs): %s.\n\n", strings.Join(loads, ", "))
	b.WriteString("|events|decision, 10 events|again, warm|blocks read|long entity|with snapshot|without|Append÷floor w1/w8/w32|ReadLast|type stream|catch-up ev/s|tail|\n")
	b.WriteString("|-:|-:|-:|-:|-:|-:|-:|-:|-:|-:|-:|-:|\n")
	for i, r := range rs {
		var ratios []string
		for _, a := range r.Appends {
			ratios = append(ratios, fmt.Sprintf("%.2f", a.Ratio))
		}
		tail := fmt.Sprintf("%.1f/%.1f", r.TailP50Ms, r.TailP99Ms)
		if r.TailError != "" {
			tail = "–"
		}
		fmt.Fprintf(&b, "|%s|%.2f/%.2f|%.2f/%.2f|%.1f/%.1f|%d|%.2f/%.2f|%.1f/%.1f|%s|%.2f/%.2f|%.1f/%.1f|%.0f|%s|\n",
			names[i], r.DecisionP50Ms, r.DecisionP99Ms, r.DecisionWarmP50Ms, r.DecisionWarmP99Ms,
			r.DecisionBlocksRead, r.DecisionWarmBlocksRead, r.LongEntityEvents, r.DecisionLongP50Ms, r.DecisionLongP99Ms,
			r.DecisionLongNoSnapP50Ms, r.DecisionLongNoSnapP99Ms, strings.Join(ratios, "/"),
			r.ReadLastP50Ms, r.ReadLastP99Ms, r.TypeStreamP50Ms, r.TypeStreamP99Ms, r.CatchupEventsPerS, tail)
	}
	b.WriteString("\n|events|table|indexes|bytes/event|load ev/s|VACUUM s|autovacuums|checkpoints in load (timed/requested)|\n")
	b.WriteString("|-:|-:|-:|-:|-:|-:|-:|-:|\n")
	for i, r := range rs {
		fmt.Fprintf(&b, "|%s|%s|%s|%.0f|%.0f|%.1f|%v|%d/%d|\n", names[i], mib(r.TableBytes), mib(r.IndexBytes), r.BytesPerEvent,
			r.LoadEventsPerS, r.VacuumSeconds, r.Table["autovacuum_count"], r.LoadBgwriter["checkpoints_timed"], r.LoadBgwriter["checkpoints_req"])
	}
	if len(rs[0].Ops) > 0 {
		b.WriteString("\nSteps of a user's life on the live log while 8 writers append (seconds the step took/the longest Append beside it, ms), and a base backup (a new standby's copy):\n\n|events")
		for _, o := range rs[0].Ops {
			b.WriteString("|" + o.Op)
		}
		b.WriteString("|base backup|\n|-:")
		for range rs[0].Ops {
			b.WriteString("|-:")
		}
		b.WriteString("|-:|\n")
		for i, r := range rs {
			b.WriteString("|" + names[i])
			for _, o := range r.Ops {
				if o.Error != "" {
					b.WriteString("|failed")
					continue
				}
				fmt.Fprintf(&b, "|%.1f/%.0f", o.Seconds, o.MaxAppendMs)
			}
			if r.BaseBackupError != "" {
				b.WriteString("|–|\n")
			} else {
				fmt.Fprintf(&b, "|%.0fs,%s|\n", r.BaseBackupSeconds, mib(r.BaseBackupBytes))
			}
		}
	}
	if chart != "" {
		fmt.Fprintf(&b, "\n![each cost over its value at %s](%s)\n", names[0], chart)
	}
	return b.String()
}

// series are the chart's lines: a cost per size (larger is worse).
var series = []struct {
	name  string
	color string
	cost  func(r *SizeResult) float64
}{
	{"decision, 10 events", "#1f77b4", func(r *SizeResult) float64 { return r.DecisionP50Ms }},
	{"the same again, warm", "#17becf", func(r *SizeResult) float64 { return r.DecisionWarmP50Ms }},
	{"decision, 10k events, snapshot", "#2ca02c", func(r *SizeResult) float64 { return r.DecisionLongP50Ms }},
	{"decision, 10k events, none", "#98df8a", func(r *SizeResult) float64 { return r.DecisionLongNoSnapP50Ms }},
	{"ReadLast", "#ff7f0e", func(r *SizeResult) float64 { return r.ReadLastP50Ms }},
	{"type stream", "#9467bd", func(r *SizeResult) float64 { return r.TypeStreamP50Ms }},
	{"floor ÷ Append, 8 writers", "#d62728", func(r *SizeResult) float64 { return inv(r.AppendRatioW8) }},
	{"bytes per event", "#7f7f7f", func(r *SizeResult) float64 { return r.BytesPerEvent }},
}

func inv(x float64) float64 {
	if x <= 0 {
		return 0
	}
	return 1 / x
}

// chartSVG draws every series over its value at the first size, against
// the log size (log scale), with the 1.5× target.
func chartSVG(rs []*SizeResult) string {
	const (
		w, h            = 640.0, 360.0
		left, right     = 50.0, 210.0
		top, bottom     = 20.0, 40.0
		plotW, plotH    = w - left - right, h - top - bottom
		yMin, yMaxFloor = 0.0, 2.0
	)
	yMax := yMaxFloor
	rel := make([][]float64, len(series))
	for i, s := range series {
		base := 0.0
		if len(rs) > 0 {
			base = s.cost(rs[0])
		}
		for _, r := range rs {
			v := math.NaN()
			if base > 0 && s.cost(r) > 0 {
				v = s.cost(r) / base
				yMax = max(yMax, v)
			}
			rel[i] = append(rel[i], v)
		}
	}
	step := 0.5 // between grid lines: at most about 8
	if yMax > 4 {
		step = math.Ceil(yMax / 8)
	}
	yMax = math.Ceil(yMax/step) * step
	lo, hi := 1.0, 10.0
	if len(rs) > 0 {
		lo, hi = math.Log10(float64(rs[0].Events)), math.Log10(float64(rs[len(rs)-1].Events))
	}
	if hi <= lo {
		hi = lo + 1
	}
	x := func(n int64) float64 { return left + (math.Log10(float64(n))-lo)/(hi-lo)*plotW }
	y := func(v float64) float64 { return top + plotH - (v-yMin)/(yMax-yMin)*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", w, h)
	for v := 0.0; v <= yMax+1e-9; v += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.1f×</text>`+"\n",
			left, y(v), left+plotW, y(v), left-4, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d62728" stroke-dasharray="4 3"/><text x="%.1f" y="%.1f" fill="#d62728">1.5× target</text>`+"\n",
		left, y(1.5), left+plotW, y(1.5), left+plotW-60, y(1.5)-4)
	for _, r := range rs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(r.Events), top+plotH+16, sizeName(r.Events))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">events in the log (log scale); each cost over its value at the first size</text>`+"\n", left+plotW/2, h-6)
	for i, s := range series {
		var pts []string
		for j, r := range rs {
			if v := rel[i][j]; !math.IsNaN(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Events), y(v)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(r.Events), y(v), s.color)
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		}
		ly := top + 10 + float64(i)*16
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			w-right+10, ly, w-right+28, ly, s.color, w-right+32, ly+4, s.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
