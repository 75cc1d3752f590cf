package main

import (
	"fmt"
	"math"
	"strings"
)

// writeNames are the write workloads, in the order of the report.
var writeNames = []string{"write/1ev", "write/batch100", "write/1ev/sync-off", "write/batch100/sync-off"}

// geomean of positive ratios (NaN ones skipped).
func geomean(xs []float64) float64 {
	sum, n := 0.0, 0
	for _, x := range xs {
		if !math.IsNaN(x) && x > 0 {
			sum += math.Log(x)
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return math.Exp(sum / float64(n))
}

// than renders a time ratio r (a ÷ b) as "x% slower/faster".
func than(r float64) string {
	switch {
	case math.IsNaN(r):
		return "n/a"
	case r >= 2:
		return fmt.Sprintf("%.1f× slower", r)
	case r >= 1:
		return fmt.Sprintf("%.0f%% slower", 100*(r-1))
	default:
		return fmt.Sprintf("%.0f%% faster", 100*(1-r))
	}
}

// ratio of a workload's target rate to its floor's (events/s ÷ floor events/s).
func (r *sizeResult) floorRatio(workload, label string) float64 {
	return r.us(workload, "floor") / r.us(workload, label)
}

func (r *sizeResult) btreeOverGIN(workload string) float64 {
	return r.us(workload, "BTREE") / r.us(workload, "GIN")
}

// The tie band: on this shared 2-core machine, per-call differences under 5%
// are within the repetitions' spread.
const tieBand = 0.05

func (rep *Report) conclusion(b *strings.Builder, s *sizeResult) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	var writes []float64
	for _, w := range writeNames {
		writes = append(writes, s.btreeOverGIN(w))
	}
	wg := geomean(writes)
	var reads []float64
	for _, w := range []string{"read/entity", "read/entity+type", "read/last", "read/two-tags"} {
		reads = append(reads, s.btreeOverGIN(w))
	}
	rg := geomean(reads)
	n := humanCount(s.N)

	p("## Conclusion\n\n")
	size := float64(s.tagIndexBytes(BTREE)) / float64(s.tagIndexBytes(GIN))
	switch {
	case wg > 1+tieBand:
		p("**Keep GIN.** At %s events the B-tree variant's writes are %s than GIN's (geometric mean of the four write workloads), and writes are what this store needs most: the append floor ratios are its open problem. ", n, than(wg))
	case wg < 1-tieBand:
		p("**The B-tree variant wins the writes** at %s events: %s than GIN (geometric mean of the four write workloads). By the rule \"writes matter most\" it should replace GIN; the reads below say at what price. ", n, than(wg))
	case rg < 1-4*tieBand:
		p("**Writes tie** at %s events (BTREE %s than GIN, geometric mean of the four write workloads: within this machine's noise), and the B-tree variant's reads are %s overall (geometric mean of the four read workloads), for a tag index %.0f× the size: the B-tree variant wins on reads. ", n, than(wg), than(rg), size)
	default:
		p("**Keep GIN.** Writes tie at %s events (BTREE %s than GIN, geometric mean of the four write workloads: within this machine's noise); the B-tree variant's reads are %s overall (geometric mean of the four read workloads), and its tag index is %.0f× the size and a second table to write. ", n, than(wg), than(rg), size)
	}
	p("GIN is faster for one entity's events (BTREE %s), with a type filter (%s), for ReadLast (%s) and for the two-tag AND (%s, or %s planned per call); the B-tree is faster for the conflict checks (by %.0f–%.0f%%, tens of µs: mostly planning, which the store's statements redo at every call, plus the heap page GIN must visit where the B-tree answers from the index alone; see below), and its tag index is %.0f× the size. ",
		than(s.btreeOverGIN("read/entity")), than(s.btreeOverGIN("read/entity+type")), than(s.btreeOverGIN("read/last")),
		than(s.btreeOverGIN("read/two-tags")), than(s.us("read/two-tags", "BTREE planned per call")/s.us("read/two-tags", "GIN")),
		100*(1-maxRatio(s, checkNames)), 100*(1-minRatio(s, checkNames)), size)
	share := func(w string) float64 {
		return (s.us(w, "GIN") - s.us(w, "no tag index")) / (s.us(w, "GIN") - s.us(w, "floor"))
	}
	p("Of GIN's gap to the INSERT floor (CPU only, `synchronous_commit = off`), the tag index is %.0f%% for one event and %.0f%% for a batch of 100; the rest is the three other B-trees.\n\n",
		100*share("write/1ev/sync-off"), 100*share("write/batch100/sync-off"))

	p("At %s events (BTREE time ÷ GIN time below 1 means the B-tree variant is faster; ratios to the floor are events/s ÷ floor events/s, 1.00× = as fast as the unindexed table):\n\n", n)
	p("| workload | GIN µs/call | BTREE µs/call | BTREE time ÷ GIN time | GIN buffers | BTREE buffers | also measured |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, w := range s.Workloads {
		g, _ := w.target("GIN")
		t, _ := w.target("BTREE")
		var also []string
		for _, x := range w.Targets {
			switch x.Label {
			case "GIN", "BTREE":
			default:
				also = append(also, fmt.Sprintf("%s %.0f µs", x.Label, x.MicrosPerCall()))
			}
		}
		p("| %s | %.0f | %.0f | %.2f | %s | %s | %s |\n", w.Name, g.MicrosPerCall(), t.MicrosPerCall(),
			t.MicrosPerCall()/g.MicrosPerCall(), planBuffers(g.Plan), planBuffers(t.Plan), strings.Join(also, "; "))
	}
	p("\n")

	// Writes.
	p("- **Writes.** One event, autocommit: GIN %.2f×, BTREE %.2f×, no tag index at all %.2f× the floor (with `synchronous_commit = off`, CPU only: %.2f×, %.2f×, %.2f×). ",
		s.floorRatio("write/1ev", "GIN"), s.floorRatio("write/1ev", "BTREE"), s.floorRatio("write/1ev", "no tag index"),
		s.floorRatio("write/1ev/sync-off", "GIN"), s.floorRatio("write/1ev/sync-off", "BTREE"), s.floorRatio("write/1ev/sync-off", "no tag index"))
	p("100 events in one INSERT: GIN %.2f×, BTREE %.2f×, no tag index %.2f× (sync off: %.2f×, %.2f×, %.2f×). ",
		s.floorRatio("write/batch100", "GIN"), s.floorRatio("write/batch100", "BTREE"), s.floorRatio("write/batch100", "no tag index"),
		s.floorRatio("write/batch100/sync-off", "GIN"), s.floorRatio("write/batch100/sync-off", "BTREE"), s.floorRatio("write/batch100/sync-off", "no tag index"))
	perEvent := func(label string) float64 {
		return (s.us("write/batch100/sync-off", label) - s.us("write/batch100/sync-off", "no tag index")) / 100
	}
	p("Per event of a batch (sync off), the tag index adds %.1f µs with GIN and %.1f µs with BTREE, on top of %.1f µs for the other indexes (no tag index − floor). ",
		perEvent("GIN"), perEvent("BTREE"),
		(s.us("write/batch100/sync-off", "no tag index")-s.us("write/batch100/sync-off", "floor"))/100)
	p("A GIN insert with `fastupdate = off` adds one item per tag to the GIN's entry tree or posting tree; the B-tree variant writes two more heap tuples (a 24-byte header each, plus the tag text) into `event_tags` *and* two B-tree entries, and runs a CTE with RETURNING: more WAL and more buffers per event. ")
	p("For one event per transaction the difference is %.0f µs per call (sync on) and %.0f µs (sync off), against a commit of %.0f µs for the bare floor INSERT.\n",
		s.us("write/1ev", "BTREE")-s.us("write/1ev", "GIN"), s.us("write/1ev/sync-off", "BTREE")-s.us("write/1ev/sync-off", "GIN"), s.us("write/1ev", "floor"))

	// Reads.
	p("- **Ordered reads.** One entity's 50 events: BTREE %s than GIN (%s vs %s buffers). ", than(s.btreeOverGIN("read/entity")),
		planBuffers(planOf(s, "read/entity", "BTREE")), planBuffers(planOf(s, "read/entity", "GIN")))
	p("The B-tree does return the rows in `(transaction_id, position)` order, but then fetches each event through `events_pkey`: one index descent per event, where GIN's bitmap scan reads the entity's 1–2 heap pages once and sorts 50 rows in memory (a quicksort of 50 rows costs microseconds). ")
	p("With the type filter: BTREE %s. ", than(s.btreeOverGIN("read/entity+type")))
	p("The last event of an entity (ReadLast) is what the B-tree's order is for: it reads one index entry and fetches one row (%s buffers), where GIN fetches all 50 rows of the entity and keeps the newest (%s buffers); BTREE is %s. ",
		planBuffers(planOf(s, "read/last", "BTREE")), planBuffers(planOf(s, "read/last", "GIN")), than(s.btreeOverGIN("read/last")))
	if s.btreeOverGIN("read/last") > 1-tieBand {
		p("With 50 events on 1–2 heap pages GIN's extra work is a handful of buffers, less than what the B-tree statement pays elsewhere (a join to plan at every call, as both variants' reads are custom plans). GIN's share grows with the entity's size and with events spread over the table. ")
	}
	p("Two tags (`account=N AND shard=M`): BTREE %s (planned per call: %s). GIN intersects the two posting lists inside one index scan, skipping through the large one; the B-tree needs a join of two index scans, and a cached statement's generic plan cannot know which tag is rare: ",
		than(s.btreeOverGIN("read/two-tags")), than(s.us("read/two-tags", "BTREE planned per call")/s.us("read/two-tags", "GIN")))
	p("it chose `%s` (%s buffers), which reads the large tag's entries up to the entity's position.\n",
		planShape(planOf(s, "read/two-tags", "BTREE")), planBuffers(planOf(s, "read/two-tags", "BTREE")))

	// Checks.
	p("- **Conflict checks.** With a cursor %d events before the head, the B-tree probe is %s than the store's statement (found), %s (tag only before the cursor), %s (absent tag), with the same handful of buffers (%s vs %s). ",
		cursorBack, than(s.btreeOverGIN("check/recent/hit")), than(s.btreeOverGIN("check/recent/old-tag")), than(s.btreeOverGIN("check/recent/absent")),
		planBuffers(planOf(s, "check/recent/absent", "BTREE")), planBuffers(planOf(s, "check/recent/absent", "GIN")))
	p("The store's recent-path statement uses no tag index at all (it reads the `events_log_order` range since the cursor and tests the tags `IS TRUE`); the difference is planning: its plan is %s, i.e. PostgreSQL plans it again at every call, because its generic plan's estimated cost is far above the custom plans'. ",
		strings.Trim(planKind(planOf(s, "check/recent/absent", "GIN")), "[]"))
	recentGeneric := []string{"check/recent/hit", "check/recent/old-tag", "check/recent/absent"}
	worst := 0.0
	jit := ""
	for _, w := range recentGeneric {
		worst = math.Max(worst, s.us(w, "GIN generic plan")/s.us(w, "BTREE"))
		if t := planJIT(planOf(s, w, "GIN generic plan")); t != "" && jit == "" {
			jit = t
		}
	}
	p("Forced to its generic plan, the same statement takes %.0f / %.0f / %.0f µs against BTREE's %.0f / %.0f / %.0f µs",
		s.us("check/recent/hit", "GIN generic plan"), s.us("check/recent/old-tag", "GIN generic plan"), s.us("check/recent/absent", "GIN generic plan"),
		s.us("check/recent/hit", "BTREE"), s.us("check/recent/old-tag", "BTREE"), s.us("check/recent/absent", "BTREE"))
	switch {
	case jit != "":
		p(": the generic plan is the same BitmapOr of `events_log_order` ranges and reads as few buffers, but its estimated cost (it cannot bound the range without the cursor's values) passes `jit_above_cost`, so with `jit = on` every call compiles it (%s in the captured plan). Re-planning is what keeps the store's check cheap at this size; the B-tree probe's generic plan is right for every tag and cursor and needs neither. ", jit)
	case worst < 1.25:
		p(": without the re-planning the two are within %.0f%%. ", 100*(worst-1))
	default:
		p(". ")
	}
	p("Without a cursor (every idempotency check): BTREE %s (found) and %s (absent) as a cached statement, %s and %s when also planned per call like the store's `EXECUTE`. ",
		than(s.btreeOverGIN("check/none/hit")), than(s.btreeOverGIN("check/none/absent")),
		than(s.us("check/none/hit", "BTREE planned per call")/s.us("check/none/hit", "GIN")),
		than(s.us("check/none/absent", "BTREE planned per call")/s.us("check/none/absent", "GIN")))
	p("An absent tag costs both a few index pages (%s vs %s buffers), so what is left is planning. A tag that exists is where the structures differ: the B-tree answers from the index alone (an index-only scan: the table is all-visible after VACUUM; in a log being appended to, the newest pages are not yet, and cost heap fetches there too), GIN has no index-only scan and its bitmap heap scan fetches the first match's heap page, which at this size is usually outside `shared_buffers` (%s in the captured call).\n",
		planBuffers(planOf(s, "check/none/absent", "BTREE")), planBuffers(planOf(s, "check/none/absent", "GIN")),
		planBufferLine(planOf(s, "check/none/hit", "GIN")))

	// Size and load.
	gl, bl := totalLoad(s.Schemas[0]), totalLoad(s.Schemas[1])
	p("- **Size and load.** The tag index is %.0f MB as GIN and %.0f MB as `event_tags` + its primary key (%.0f×): GIN stores each tag once with a compressed list of row pointers, the B-tree table stores tag, `transaction_id` and `position` for every (event, tag) twice (heap and index). Loading took %.0f s (GIN) and %.0f s (BTREE).\n\n",
		float64(s.tagIndexBytes(GIN))/1e6, float64(s.tagIndexBytes(BTREE))/1e6, float64(s.tagIndexBytes(BTREE))/float64(s.tagIndexBytes(GIN)),
		gl.Seconds(), bl.Seconds())

	rep.surprises(b, s)

	if len(rep.Sizes) > 1 {
		p("Across sizes (BTREE time ÷ GIN time):\n\n| workload |")
		for _, z := range rep.Sizes {
			p(" %s |", humanCount(z.N))
		}
		p("\n|---|")
		for range rep.Sizes {
			p("---:|")
		}
		p("\n")
		for _, w := range s.Workloads {
			p("| %s |", w.Name)
			for _, z := range rep.Sizes {
				p(" %.2f |", z.btreeOverGIN(w.Name))
			}
			p("\n")
		}
		p("\n")
	}
}

func planOf(s *sizeResult, workload, label string) string {
	w, _ := s.workload(workload)
	t, _ := w.target(label)
	return t.Plan
}

// planJIT is the JIT total time of a plan, or "".
func planJIT(plan string) string {
	for _, l := range strings.Split(plan, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Timing:") {
			if _, total, ok := strings.Cut(l, "Total "); ok {
				return "JIT " + strings.TrimSpace(total)
			}
		}
	}
	return ""
}

// surprises lists what the run found that nobody asked about, each only when
// the captured plans show it.
func (rep *Report) surprises(b *strings.Builder, s *sizeResult) {
	var out []string
	recent := planOf(s, "check/recent/absent", "GIN")
	if planKind(recent) == "[custom]" {
		o := "002's comment on the recent path says its cached plan is \"the same whatever the tag\": the plan is indeed the same, but the plan cache never settles on it as a generic plan (the custom plans are estimated far cheaper), so it is planned again at every append (measured here as a prepared statement, which goes through the same plan cache as PL/pgSQL's statements)."
		custom := true
		for _, w := range []string{"read/entity", "read/last"} {
			for _, v := range []string{"GIN", "BTREE"} {
				custom = custom && planKind(planOf(s, w, v)) == "[custom]"
			}
		}
		if custom {
			o += " Both variants' entity reads and ReadLast are custom plans too (planned at every call), which is part of what every read costs."
		}
		out = append(out, o)
	}
	for _, w := range []string{"check/recent/hit", "check/recent/old-tag", "check/recent/absent"} {
		if t := planJIT(planOf(s, w, "GIN generic plan")); t != "" {
			out = append(out, fmt.Sprintf("JIT: the recent check's generic plan at %s events scans the same few buffers as the custom plan but spends %s per call compiling it (`jit = on`, estimated cost above `jit_above_cost`). Any store statement that ends up on a generic plan with a large estimated cost pays this; the custom plans stay below the threshold. The second form of append_events (committed while this ran) forces generic plans in append_events, and its recent check with in-progress transactions at the decision is this very statement: at this size it would pay the JIT compile on every such append unless JIT is off for it.", humanCount(s.N), strings.TrimPrefix(t, "JIT ")))
			break
		}
	}
	if strings.Contains(recent, "Bitmap Index Scan on events_event_id") {
		out = append(out, "In the recent check's custom plan, the `transaction_id = ANY ('{}')` arm (no in-progress transactions) is answered by a scan of the partial index `events_event_id`: an empty `= ANY` is provably false, so any partial index \"matches\" it, and this one is empty here (no event ids), hence cheapest. It is cost-based and harmless: with half the events carrying an id (checked by hand at 100k events) the planner uses `events_log_order` for that arm instead.")
	}
	if strings.Contains(planShape(planOf(s, "read/two-tags", "BTREE")), "Merge Join") {
		out = append(out, fmt.Sprintf("The B-tree two-tag AND as a cached statement: after five custom plans the plan cache switched to a generic plan that merge-joins the two tags' index ranges in `(transaction_id, position)` order; it stops only at the end of the rare tag, so it reads the `shard` tag from its start to the entity's position: %.1f ms per call at %s events. Planned per call the rare tag drives a nested loop (%.0f µs), still %s than GIN.",
			s.us("read/two-tags", "BTREE")/1000, humanCount(s.N), s.us("read/two-tags", "BTREE planned per call"),
			than(s.us("read/two-tags", "BTREE planned per call")/s.us("read/two-tags", "GIN"))))
	}
	if len(out) == 0 {
		return
	}
	fmt.Fprintf(b, "Surprises:\n\n")
	for _, o := range out {
		fmt.Fprintf(b, "- %s\n", o)
	}
	fmt.Fprintf(b, "\n")
}

var checkNames = []string{"check/recent/hit", "check/recent/old-tag", "check/recent/absent", "check/none/hit", "check/none/absent"}

func maxRatio(s *sizeResult, names []string) float64 {
	m := math.Inf(-1)
	for _, n := range names {
		m = math.Max(m, s.btreeOverGIN(n))
	}
	return m
}

func minRatio(s *sizeResult, names []string) float64 {
	m := math.Inf(1)
	for _, n := range names {
		m = math.Min(m, s.btreeOverGIN(n))
	}
	return m
}

// planBufferLine is the top node's "Buffers:" text, or "".
func planBufferLine(plan string) string {
	for _, l := range planLines(plan) {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "Buffers:") {
			return "`" + l + "`"
		}
	}
	return ""
}
