package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/pgserver"
)

// environment is what the report prints at its top.
// It is saved in the results file (--json), so --from can render the report
// again.
type environment struct {
	Command     string      `json:"command"`
	Date        string      `json:"date"`
	Duration    string      `json:"duration"`
	CPUs        int         `json:"cpus"`
	CPUModel    string      `json:"cpu_model"`
	MemoryGiB   float64     `json:"memory_gib"`
	GoVersion   string      `json:"go_version"`
	OSArch      string      `json:"os_arch"`
	ServerWhere string      `json:"server_where"`
	Source      string      `json:"source"`
	PGVersion   string      `json:"pg_version"`
	Settings    [][2]string `json:"settings"`
	LoadAvg     string      `json:"load_avg"`
}

// reportedSettings are the server settings that move the figures.
var reportedSettings = []string{
	"shared_buffers", "synchronous_commit", "fsync", "full_page_writes", "wal_level",
	"max_connections", "work_mem", "effective_cache_size", "max_wal_size", "checkpoint_timeout",
	"random_page_cost", "jit",
}

func describeEnvironment(ctx context.Context, pool *pgxpool.Pool, o *options, srv *pgserver.Server) (*environment, error) {
	e := &environment{
		Command:   "go run ./bench " + strings.Join(o.args, " "),
		Date:      time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		CPUs:      runtime.NumCPU(),
		CPUModel:  cpuModel(),
		MemoryGiB: memoryGiB(),
		GoVersion: runtime.Version(),
		OSArch:    runtime.GOOS + "/" + runtime.GOARCH,
		Source:    string(srv.Source()),
		LoadAvg:   loadAvg(),
	}
	e.Command = strings.TrimSpace(e.Command)
	if cfg, err := pgconn.ParseConfig(srv.DSN()); err == nil {
		e.ServerWhere = fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
		if strings.HasPrefix(cfg.Host, "/") {
			e.ServerWhere = cfg.Host
		}
	}
	if err := pool.QueryRow(ctx, `SELECT version()`).Scan(&e.PGVersion); err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name = ANY($1) ORDER BY name`, reportedSettings)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, setting, unit string
		if err := rows.Scan(&name, &setting, &unit); err != nil {
			return nil, err
		}
		e.Settings = append(e.Settings, [2]string{name, humanSetting(setting, unit)})
	}
	return e, rows.Err()
}

// humanSetting renders 16384 × 8kB as "128MB".
func humanSetting(setting, unit string) string {
	var mult int64
	switch unit {
	case "8kB":
		mult = 8 << 10
	case "kB":
		mult = 1 << 10
	case "MB":
		mult = 1 << 20
	default:
		if unit != "" {
			return setting + " " + unit
		}
		return setting
	}
	var n int64
	if _, err := fmt.Sscan(setting, &n); err != nil {
		return setting + " " + unit
	}
	b := n * mult
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%dMB", b>>20)
	}
	return fmt.Sprintf("%dkB", b>>10)
}

// loadAvg is the 1, 5 and 15-minute load average at the start (Linux), so a
// reader can tell a busy machine's figures from a quiet one's.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memoryGiB() float64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); err == nil {
			return float64(kb) / (1 << 20)
		}
	}
	return 0
}

// writeTable prints the results as a Markdown table.
func writeTable(w io.Writer, results []*Result) {
	fmt.Fprintln(w, "| workload | writers | table events | events/s | floor | floor events/s | ratio | p50 ms | p99 ms | notes |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | %d | | **FAILED** | | | | | | %s |\n", r.Name, r.Writers, strings.ReplaceAll(r.Error, "|", "\\|"))
			continue
		}
		floor := r.Floor
		if r.Floor != "" && r.FloorWriters != r.Writers {
			floor += fmt.Sprintf(" ×%d", r.FloorWriters)
		}
		notes := r.Notes
		if r.Cost != nil {
			c := "per event: " + r.Cost.String()
			if r.FloorCost != nil {
				c += " (floor: " + r.FloorCost.String() + ")"
			}
			notes = strings.TrimSuffix(c+"; "+notes, "; ")
		}
		if b := baselineNotes(r); b != "" {
			notes = strings.TrimSuffix(b+"; "+notes, "; ")
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %s | %s | %.2f | %.2f | %s |\n",
			r.Name, r.Writers, sizeName(int(r.TableEvents)), r.EventsPerS, floor,
			fmtFloat(r.FloorEventsPerS, "%.0f"), fmtFloat(r.Ratio, "%.2f×"), r.P50Ms, r.P99Ms, notes)
	}
}

// baselineNotes renders the baselines for the notes column: for each, its
// rate, latencies and the workload's ratio to it.
func baselineNotes(r *Result) string {
	var parts []string
	for _, b := range r.Baselines {
		name := b.Name
		if b.Writers != r.Writers {
			name += fmt.Sprintf(" ×%d", b.Writers)
		}
		parts = append(parts, fmt.Sprintf("**%s× of %s** (%.0f ev/s, p50 %.2f, p99 %.2f ms)",
			fmtFloat(b.Ratio, "%.2f"), name, b.EventsPerS, b.P50Ms, b.P99Ms))
	}
	return strings.Join(parts, "; ")
}

// writeMarkdown writes the generated report (bench/PERFORMANCE.md) of f;
// svgFile, when set, is the chart it links to; from, when set, is the
// results file it was re-rendered from (--from).
func writeMarkdown(path, svgFile, from string, f *resultsFile) error {
	var b strings.Builder
	fmt.Fprintln(&b, "# pgdcb performance")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "<!-- GENERATED by `go run ./bench --markdown`: do not edit by hand; rerun the command below. -->")
	fmt.Fprintln(&b)
	e, run := f.Environment, f.Run
	if e == nil {
		e = &environment{Command: "go run ./bench (command not recorded)"}
	}
	fmt.Fprintf(&b, "Generated by\n\n```sh\n%s\n```\n\n", e.Command)
	if from != "" {
		fmt.Fprintf(&b, "and rendered again from the results it wrote, without measuring, by `go run ./bench --from %s` (with the same `--svg` and `--markdown`).\n\n", filepath.ToSlash(from))
	}
	if run.Quick {
		fmt.Fprintln(&b, "> **Quick run** (`--quick`): short repetitions and the 10k-event table only. These figures show that the program works; for figures to compare, run `make bench` on a quiet machine.")
		fmt.Fprintln(&b)
	}
	if f.Environment == nil {
		fmt.Fprintln(&b, "- Environment: not recorded (the results file was written before results files carried it).")
	} else {
		fmt.Fprintf(&b, "- Date: %s; run time %s; %d repetitions of %s per workload after a %s warm-up, median reported.\n", e.Date, e.Duration, run.Reps, run.Duration, run.Warmup)
		fmt.Fprintf(&b, "- Machine: %d CPUs (%s), %.1f GiB memory, %s, %s; load average at start %s.\n", e.CPUs, e.CPUModel, e.MemoryGiB, e.OSArch, e.GoVersion, e.LoadAvg)
		fmt.Fprintf(&b, "- PostgreSQL: %s (%s server at %s).\n", e.PGVersion, e.Source, e.ServerWhere)
		var set []string
		for _, s := range e.Settings {
			set = append(set, fmt.Sprintf("`%s=%s`", s[0], s[1]))
		}
		fmt.Fprintf(&b, "- Settings: %s.\n", strings.Join(set, ", "))
	}
	if len(f.Renamed) > 0 {
		fmt.Fprintf(&b, "- Row names: the run was measured when the grouped rows were called `group/…` and the per-call rows had the plain names; %d rows were renamed when this report was rendered (`group/X` → `X`, per-call `X` → `X/no-group`).\n", len(f.Renamed))
	}
	if len(f.Missing) > 0 {
		fmt.Fprintf(&b, "- Not in this run: %s.\n", "`"+strings.Join(f.Missing, "`, `")+"`")
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "How to read it: *events/s* is events appended (or read, or — for `idempotent/duplicate` — appends refused) per second of wall time; the *floor* is measured in the same run and schema, interleaved with the workload: for writes an autocommit `INSERT` of the same rows into a table with the same columns and only a primary key, for reads the same `SELECT` written by hand on the same table. *ratio* = events/s ÷ floor events/s. Latencies are per call. The headline rows (`append/1ev/wN`, `appendif/distinct/wN`, `cycle/entity10/wN`) run the default configuration, group commit on; rows marked `/no-group` run the same operation on the per-call path (`Config.GroupCommitDisabled`). Method and limits: [docs/BENCHMARKS.md](../docs/BENCHMARKS.md).")
	fmt.Fprintln(&b)
	if svgFile != "" {
		if rel, err := filepath.Rel(filepath.Dir(path), svgFile); err == nil {
			fmt.Fprintf(&b, "![throughput against writers](%s)\n\n", filepath.ToSlash(rel))
		}
	}
	writeTable(&b, f.Results)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
