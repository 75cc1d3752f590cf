package pgdcbprom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/pgdcbprom"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/runstore"
)

const (
	dashboardFile = "../ops/grafana/pgdcb.json"
	rulesFile     = "../ops/prometheus/pgdcb-rules.yml"
)

// definedMetrics returns the names of every metric the code defines, from
// the Describe of a Metrics watching real components.
func definedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	store := pgdcbtest.NewStore(t, nil)
	rs, err := runstore.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx, err := effects.NewWorker(store, &effects.Config{Handlers: map[string]effects.Handler{
		"noop": func(context.Context, effects.Effect) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	m := pgdcbprom.New()
	m.WatchStore(store)
	m.WatchRunstore(rs)
	m.WatchEffects(fx)
	cs := []prometheus.Collector{m}

	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		names[m[1]] = true
	}
	return names
}

var metricName = regexp.MustCompile(`\bpgdcb_[a-z0-9_]+`)

// undefined returns the pgdcb_ metric names of expr that the code does not
// define (a histogram's _bucket, _sum and _count series count as its own).
func undefined(expr string, defined map[string]bool) []string {
	var out []string
	for _, n := range metricName.FindAllString(expr, -1) {
		base := n
		for _, sfx := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, sfx); ok && defined[b] {
				base = b
			}
		}
		if !defined[base] {
			out = append(out, n)
		}
	}
	return out
}

type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// The dashboard is a Grafana dashboard (the fields Grafana needs to import
// it, panels on the 24-column grid without overlap, unique ids, a query per
// panel on the datasource variable) whose queries use only defined metrics
// and that shows what an operator watches.
func TestDashboard(t *testing.T) {
	t.Parallel()
	defined := definedMetrics(t)
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 {
		t.Errorf("title %q, uid %q, schemaVersion %d: want a title, a uid and a schemaVersion ≥ 30", d.Title, d.UID, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Errorf("templating has no datasource variable named datasource: %v", vars)
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID <= 0 {
			t.Errorf("panel %q: id %d is not positive or not unique", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at (%d,%d)", other, p.Title, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.Type == "row" {
			continue
		}
		if !slices.Contains([]string{"timeseries", "stat", "gauge", "table", "bargauge"}, p.Type) {
			t.Errorf("panel %q: type %q", p.Title, p.Type)
		}
		if p.Description == "" {
			t.Errorf("panel %q has no description", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || refs[q.RefID] {
				t.Errorf("panel %q: a query without expr or with an empty or repeated refId %q", p.Title, q.RefID)
			}
			refs[q.RefID] = true
			if u := undefined(q.Expr, defined); len(u) > 0 {
				t.Errorf("panel %q uses metrics the code does not define: %v", p.Title, u)
			}
			exprs = append(exprs, q.Expr)
		}
	}
	all := strings.Join(exprs, "\n")
	for _, m := range []string{
		"pgdcb_store_append_duration_seconds_count", "pgdcb_store_append_duration_seconds_bucket",
		"pgdcb_store_append_conflicts_total", "pgdcb_store_append_group_size",
		"pgdcb_reader_lag_seconds", "pgdcb_reader_lag_events", "pgdcb_reader_horizon_held_seconds",
		"pgdcb_reader_failed", "pgdcb_outbox_stalled", "pgdcb_runstore_projector_lag_seconds",
		"pgdcb_effects_backlog", "pgdcb_effects_failed_total",
	} {
		if !strings.Contains(all, m) {
			t.Errorf("the dashboard shows no %s", m)
		}
	}
	checkPromQL(t, "dashboard", exprs)
}

// The rules use only defined metrics, alert on what the docs call alerts, and
// pass promtool check rules.
func TestAlertingRules(t *testing.T) {
	t.Parallel()
	defined := definedMetrics(t)
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	exprLine := regexp.MustCompile(`(?m)^\s+expr: (.+)$`)
	exprs := exprLine.FindAllStringSubmatch(string(b), -1)
	if len(exprs) == 0 {
		t.Fatalf("no expr in %s", rulesFile)
	}
	for _, e := range exprs {
		if u := undefined(e[1], defined); len(u) > 0 {
			t.Errorf("rule %q uses metrics the code does not define: %v", e[1], u)
		}
		if !metricName.MatchString(e[1]) {
			t.Errorf("rule %q uses no pgdcb metric", e[1])
		}
	}
	for _, alert := range []string{"PgdcbReaderFailed", "PgdcbReaderLagHigh", "PgdcbHorizonHeld",
		"PgdcbOutboxStalled", "PgdcbRunstoreProjectorLagHigh", "PgdcbEffectsFailed", "PgdcbEffectsBacklogOld"} {
		if !strings.Contains(string(b), "alert: "+alert+"\n") {
			t.Errorf("%s has no alert %s", rulesFile, alert)
		}
	}
	promtool(t, "check", "rules", rulesFile)
}

// checkPromQL has promtool parse the dashboard's queries, as recording rules
// of a scratch rules file (Grafana's variables replaced by values).
func checkPromQL(t *testing.T, what string, exprs []string) {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("groups:\n  - name: " + what + "\n    rules:\n")
	grafanaVars := strings.NewReplacer("$__rate_interval", "5m", "$name", ".*")
	for i, e := range exprs {
		q, err := json.Marshal(grafanaVars.Replace(e)) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "      - record: pgdcb_check:%d\n        expr: %s\n", i, q)
	}
	f := filepath.Join(t.TempDir(), what+".yml")
	if err := os.WriteFile(f, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", f)
}

// promtool runs Prometheus's promtool (Debian: apt-get install prometheus),
// skipping, with a message saying so, where it is not installed.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skipf("promtool not installed (apt-get install prometheus), %s not checked by it", strings.Join(args, " "))
	}
	out, err := exec.CommandContext(t.Context(), path, args...).CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
