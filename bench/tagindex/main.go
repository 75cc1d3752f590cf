// Command tagindex measures the tag-index decision (bench/tagindex/TAGINDEX.md): the
// store's GIN index on events.tags against a B-tree over a derived
// event_tags(tag, transaction_id, position) table, at 1M and 10M events.
//
//	go run ./bench/tagindex [--sizes 1000000,10000000] [--dsn URL] [--markdown FILE] [--json FILE]
//	go run ./bench/tagindex --render results.json --markdown FILE
//
// (make bench-tagindex writes bench/tagindex/TAGINDEX.md.) The server is --dsn, else
// $PGDCB_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres. For
// each size the program creates three fresh schemas named tagidx_<hex>_gin,
// tagidx_<hex>_btree and tagidx_<hex>_floor, fills the first two with the same
// events (the shape of eventstore/bench_test.go's loadEvents), measures every
// workload on one connection with one client, interleaving the variants, and
// drops the schemas (also on Ctrl-C). Every workload checks its results and
// the run fails (exit status 1, no report written) when one is wrong. See
// bench/tagindex/TAGINDEX.md for the method and the last results.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	sizes    []int
	dsn      string
	markdown string
	jsonFile string
	render   string
	duration time.Duration
	warmup   time.Duration
	reps     int
	args     []string
}

const defaultDSN = "postgres://postgres@127.0.0.1:5432/postgres"

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{args: args}
	fs := flag.NewFlagSet("tagindex", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("sizes", "1000000,10000000", "comma-separated table sizes in events (each a multiple of 1000, at least 10000)")
	fs.StringVar(&o.dsn, "dsn", "", "PostgreSQL URL (default: $PGDCB_DATABASE_URL, else "+defaultDSN+")")
	fs.StringVar(&o.markdown, "markdown", "", "write the report to `FILE` (bench/tagindex/TAGINDEX.md)")
	fs.StringVar(&o.jsonFile, "json", "", "also write the raw results (every repetition, every plan) as JSON to `FILE`")
	fs.StringVar(&o.render, "render", "", "measure nothing: re-render --markdown from the results `FILE` a run wrote with --json")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each measured repetition")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "length of each warm-up")
	fs.IntVar(&o.reps, "reps", 3, "repetitions per workload and variant (at least 3; the median is reported)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--sizes: %q: %w", f, err)
		}
		if n < 10_000 || n%1000 != 0 {
			return nil, fmt.Errorf("--sizes: %d: must be a multiple of 1000, at least 10000", n)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.reps < 3 {
		return nil, fmt.Errorf("--reps %d: at least 3 repetitions are needed for a median", o.reps)
	}
	if o.duration <= 0 || o.warmup < 0 {
		return nil, errors.New("--duration must be positive and --warmup not negative")
	}
	if o.render != "" && o.markdown == "" {
		return nil, errors.New("--render needs --markdown")
	}
	if o.dsn == "" {
		o.dsn = os.Getenv("PGDCB_DATABASE_URL")
	}
	if o.dsn == "" {
		o.dsn = defaultDSN
	}
	return o, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tagindex:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, time.Now().Format("15:04:05 ")+format+"\n", a...)
	}
	if o.render != "" {
		raw, err := os.ReadFile(o.render)
		if err != nil {
			return fmt.Errorf("reading results: %w", err)
		}
		var rep Report
		if err := json.Unmarshal(raw, &rep); err != nil {
			return fmt.Errorf("decoding %s: %w", o.render, err)
		}
		return writeMarkdown(&rep, o.markdown, logf)
	}
	env, err := describeEnv(ctx, o)
	if err != nil {
		return err
	}
	rep := &Report{Args: o.args, Env: env, Duration: o.duration, Warmup: o.warmup, Reps: o.reps}
	start := time.Now()
	for _, n := range o.sizes {
		res, err := runSize(ctx, o, n, logf)
		if err != nil {
			return fmt.Errorf("%d events: %w", n, err)
		}
		rep.Sizes = append(rep.Sizes, res)
		printSummary(stdout, res)
	}
	rep.RunTime = time.Since(start)
	if o.jsonFile != "" {
		raw, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding results: %w", err)
		}
		if err := os.WriteFile(o.jsonFile, append(raw, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.jsonFile, err)
		}
		logf("wrote %s", o.jsonFile)
	}
	if o.markdown != "" {
		return writeMarkdown(rep, o.markdown, logf)
	}
	return nil
}

func writeMarkdown(rep *Report, file string, logf func(string, ...any)) error {
	if err := os.WriteFile(file, []byte(rep.markdown()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	logf("wrote %s", file)
	return nil
}
