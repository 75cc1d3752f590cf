package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// series is one line of the chart.
type series struct {
	label  string
	color  string
	dashed bool
	points [][2]float64 // writers, events/s
}

// chartSeries picks the lines: one-event Append and AppendIf on distinct
// boundaries on the default path (group commit on, 1 to 128 writers) and on
// the per-call path (/no-group), the autocommit INSERT floor measured next
// to the default-path appends, and the same INSERT into a copy of events
// with its indexes.
func chartSeries(results []*Result) []series {
	app := series{label: "Append 1 event, default (grouped)", color: "#1f77b4"}
	aif := series{label: "AppendIf, default (grouped)", color: "#d62728"}
	appNG := series{label: "Append 1 event, per call", color: "#9ecae1"}
	aifNG := series{label: "AppendIf, per call", color: "#fc9272"}
	flo := series{label: "floor: INSERT 1 row, no index", color: "#555555", dashed: true}
	idx := series{label: "INSERT 1 row, events' indexes", color: "#8c6d31", dashed: true}
	add := func(s *series, x int, y float64) { s.points = append(s.points, [2]float64{float64(x), y}) }
	for _, r := range results {
		if r.Error != "" {
			continue
		}
		switch r.Group {
		case "append":
			add(&app, r.Writers, r.EventsPerS)
			if r.FloorEventsPerS != nil {
				add(&flo, r.FloorWriters, *r.FloorEventsPerS)
			}
		case "appendif":
			add(&aif, r.Writers, r.EventsPerS)
		case "append-nogroup":
			add(&appNG, r.Writers, r.EventsPerS)
		case "appendif-nogroup":
			add(&aifNG, r.Writers, r.EventsPerS)
		case "indexed":
			if strings.Contains(r.Name, "/1ev/") {
				add(&idx, r.Writers, r.EventsPerS)
			}
		}
	}
	var out []series
	for _, s := range []series{flo, idx, app, aif, appNG, aifNG} {
		if len(s.points) > 0 {
			sort.Slice(s.points, func(i, j int) bool { return s.points[i][0] < s.points[j][0] })
			out = append(out, s)
		}
	}
	return out
}

// niceCeil rounds v up to a round multiple of a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// chartSVG draws throughput against writers: x on a log2 scale (1, 2, 4 …
// 128 writers), y linear from zero. Hand-written SVG, no dependency.
func chartSVG(results []*Result) string {
	const (
		w, h                   = 900, 480
		left, right, top, bott = 90, 310, 60, 70
	)
	ss := chartSeries(results)
	maxX, maxY := 1.0, 0.0
	for _, s := range ss {
		for _, p := range s.points {
			maxX, maxY = math.Max(maxX, p[0]), math.Max(maxY, p[1])
		}
	}
	xMaxLog := math.Max(1, math.Ceil(math.Log2(maxX)))
	yMax := niceCeil(maxY * 1.05)
	pw, ph := float64(w-left-right), float64(h-top-bott)
	px := func(x float64) float64 { return left + math.Log2(x)/xMaxLog*pw }
	py := func(y float64) float64 { return top + ph - y/yMax*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="17" font-weight="bold">pgdcb: appended events per second against concurrent writers</text>`+"\n", left)
	fmt.Fprintf(&b, `<text x="%d" y="47" font-size="12" fill="#555">solid: pgdcb (dark: default configuration, group commit on; light: per call); dashed: plain INSERTs of the same run</text>`+"\n", left)
	// Grid and y ticks.
	for i := 0; i <= 5; i++ {
		v := yMax * float64(i) / 5
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, y, left+pw, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y+4, humanCount(v))
	}
	// x ticks at powers of two.
	for e := 0.0; e <= xMaxLog; e++ {
		x := px(math.Pow(2, e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/>`+"\n", x, top, x, top+ph)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x, top+ph, x, top+ph+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, top+ph+20, int(math.Pow(2, e)))
	}
	// Axes.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="#333"/>`+"\n", left, top, left, top+ph)
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, top+ph, left+pw, top+ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">concurrent writers (log scale)</text>`+"\n", left+pw/2, h-22)
	fmt.Fprintf(&b, `<text transform="translate(22 %.1f) rotate(-90)" text-anchor="middle">events per second</text>`+"\n", top+ph/2)
	// Lines.
	for _, s := range ss {
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="7 5"`
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		for _, p := range s.points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s: %d writers, %.0f events/s</title></circle>`+"\n",
				px(p[0]), py(p[1]), s.color, s.label, int(p[0]), p[1])
		}
	}
	// Legend.
	lx, ly := float64(w-right+25), float64(top+10)
	for i, s := range ss {
		y := ly + float64(i)*44
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="7 5"`
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"%s/>`+"\n", lx, y, lx+30, y, s.color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+38, y+4, xmlEscape(s.label))
		var vals []string
		for _, p := range s.points {
			vals = append(vals, fmt.Sprintf("%d: %s", int(p[0]), humanCount(p[1])))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#666">%s</text>`+"\n", lx+38, y+20, xmlEscape(strings.Join(vals, " · ")))
	}
	if len(ss) == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">no append workload in this run</text>`+"\n", left+pw/2, top+ph/2)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// humanCount renders 12500 as "12.5k".
func humanCount(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case v >= 1e3:
		return trimZero(fmt.Sprintf("%.1f", v/1e3)) + "k"
	}
	return fmt.Sprintf("%.0f", v)
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
