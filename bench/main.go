// Command bench measures pgdcb against PostgreSQL and against floors
// measured in the same run: plain INSERTs into an unindexed table of the same
// columns for writes, hand-written SELECTs on the same table for reads.
//
//	go run ./bench [--quick] [--large] [--json FILE] [--svg FILE] [--markdown FILE]
//	go run ./bench --from FILE [--svg FILE] [--markdown FILE]
//
// The server is PGDCB_DATABASE_URL (or --dsn), else a local server, else a
// throwaway cluster (see internal/pgserver). Every workload runs in a fresh
// schema pgdcb_bench_<hex>, dropped afterwards. See docs/BENCHMARKS.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/pgserver"
)

type options struct {
	quick, large     bool
	dsn              string
	jsonFile         string
	svgFile          string
	markdownFile     string
	from             string
	only             string
	duration, warmup time.Duration
	reps             int
	groupSenders     int
	cpuProfile       string
	args             []string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{args: args}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.quick, "quick", false, "short runs, 10k-event table only, no 128-writer workloads (about 3 minutes)")
	fs.BoolVar(&o.large, "large", false, "also run the read workloads at 10M events")
	fs.StringVar(&o.dsn, "dsn", "", "PostgreSQL URL (default: $PGDCB_DATABASE_URL, else a local or throwaway server)")
	fs.StringVar(&o.jsonFile, "json", "", "write the results as JSON to `FILE`")
	fs.StringVar(&o.svgFile, "svg", "", "write the throughput-vs-writers chart as SVG to `FILE`")
	fs.StringVar(&o.markdownFile, "markdown", "", "write the report (bench/PERFORMANCE.md) to `FILE`")
	fs.StringVar(&o.from, "from", "", "measure nothing: render --svg and --markdown (and --json, in today's format) from the results `FILE` a run wrote with --json")
	fs.StringVar(&o.only, "only", "", "run only workloads whose name matches this `regexp`")
	fs.DurationVar(&o.duration, "duration", 0, "length of each measured repetition (default 2s, 400ms with --quick)")
	fs.DurationVar(&o.warmup, "warmup", 0, "length of the warm-up (default 1s, 200ms with --quick)")
	fs.IntVar(&o.reps, "reps", 0, "repetitions per workload, at least 3 (default 5, 3 with --quick)")
	fs.IntVar(&o.groupSenders, "group-senders", 0, "Config.GroupSenders of the group/* workloads' stores (default: the store's default)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write this program's CPU profile over all the workloads run to `FILE` (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.from != "" && o.svgFile == "" && o.markdownFile == "" && o.jsonFile == "" {
		return nil, errors.New("--from needs --svg, --markdown or --json")
	}
	if o.duration == 0 {
		o.duration = pick(o.quick, 400*time.Millisecond, 2*time.Second)
	}
	if o.warmup == 0 {
		o.warmup = pick(o.quick, 200*time.Millisecond, time.Second)
	}
	if o.reps == 0 {
		o.reps = pick(o.quick, 3, 5)
	}
	if o.groupSenders < 0 {
		return nil, fmt.Errorf("--group-senders %d: must not be negative", o.groupSenders)
	}
	if o.reps < 3 {
		return nil, fmt.Errorf("--reps %d: at least 3 repetitions are needed for a median", o.reps)
	}
	return o, nil
}

// maxPoolWriters bounds the pool: one connection per writer up to 64 (plus
// two), so that the 128-writer workloads do not take 130 of the server's
// connections; beyond 64, writers wait for a connection as an application's
// goroutines do.
const maxPoolWriters = 64

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
		os.Exit(1)
	}
}

// run is the whole program; tests call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.from != "" {
		return render(o, stderr)
	}
	workloads, err := selectWorkloads(o)
	if err != nil {
		return err
	}
	if len(workloads) == 0 {
		return errors.New("no workload selected")
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	findCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	srv, err := pgserver.Find(findCtx, pgserver.Options{URL: o.dsn, EnvVar: pgserver.EnvVar})
	cancel()
	if err != nil {
		return err
	}
	defer srv.Close()
	defer closeLogicalCluster()

	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		return err
	}
	maxW := 1
	for _, w := range workloads {
		maxW = max(maxW, w.Writers)
	}
	if !strings.Contains(srv.DSN(), "pool_max_conns") {
		cfg.MaxConns = int32(min(maxW, maxPoolWriters) + 2)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	env, err := describeEnvironment(ctx, pool, o, srv)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: %d workloads, %d × %s after %s warm-up, server %s (%s)\n",
		len(workloads), o.reps, o.duration, o.warmup, env.ServerWhere, srv.Source())

	started := time.Now()
	results, runErr := runAll(ctx, pool, o, workloads, stderr)
	env.Duration = time.Since(started).Round(time.Second).String()

	writeTable(stdout, results)
	failed := 0
	for _, r := range results {
		if r.Error != "" {
			failed++
		}
	}
	file := &resultsFile{Environment: env, Run: runInfoOf(o), Results: results}
	if o.jsonFile != "" {
		if err := writeResultsFile(o.jsonFile, file); err != nil {
			return err
		}
	}
	if o.svgFile != "" {
		if err := os.WriteFile(o.svgFile, []byte(chartSVG(results)), 0o644); err != nil {
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	if failed > 0 {
		return fmt.Errorf("%d workload(s) FAILED their self-check or errored; no report written", failed)
	}
	if o.markdownFile != "" {
		if err := writeMarkdown(o.markdownFile, o.svgFile, "", file); err != nil {
			return err
		}
	}
	return nil
}

// render is --from: the outputs of a past run, from its results file,
// without measuring. It names the rows the run lacks on stderr (and in the
// report).
func render(o *options, stderr io.Writer) error {
	f, err := loadResults(o.from)
	if err != nil {
		return err
	}
	if f.Format == 1 {
		fmt.Fprintf(stderr, "bench: %s uses the names of before group commit was the headline; renamed %d rows\n", o.from, len(f.Renamed))
	}
	if len(f.Missing) > 0 {
		fmt.Fprintf(stderr, "bench: %s has no row for %d workload(s) of its selection: %s\n", o.from, len(f.Missing), strings.Join(f.Missing, ", "))
	}
	if o.svgFile != "" {
		if err := os.WriteFile(o.svgFile, []byte(chartSVG(f.Results)), 0o644); err != nil {
			return err
		}
	}
	if o.markdownFile != "" {
		if err := writeMarkdown(o.markdownFile, o.svgFile, o.from, f); err != nil {
			return err
		}
	}
	if o.jsonFile != "" {
		return writeResultsFile(o.jsonFile, f)
	}
	return nil
}
