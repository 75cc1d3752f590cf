// Command scale is the log-size study (issue #39 §2): it grows ONE event
// store schema through the sizes of --sizes (default 10^6, 10^7, 10^8
// events) and, at each size, measures what users meet as the log grows. It
// writes bench/scale/results.json (one object per size), docs/SCALE.md and
// its chart; `make scale` runs it. It is not part of `make test`.
//
//	go run ./bench/scale [--sizes 1000000,10000000,100000000] [--json FILE] [--markdown FILE] [--svg FILE]
//	go run ./bench/scale --render results.json --markdown FILE [--svg FILE]
//
// The server is --dsn, else $PGDCB_DATABASE_URL, else
// postgres://postgres@127.0.0.1:5432/postgres, and must be local: before
// loading, and again before each size and every 10 s while loading, the
// program reads the free space of the server's data directory (statfs) and
// stops cleanly, naming what it needs, when the rest of the load (bytes per
// event measured on the first 100k events, ×1.3) and a reserve of twice
// max_wal_size plus 1 GiB do not fit. The schema is pgdcb_scale_<hex>,
// migrated by sql.Migrate, dropped at the end (also on Ctrl-C) unless
// --keep. Give it a database of its own (CREATE DATABASE, then --dsn): a
// transaction holding an xid in the store's database stalls catch-up,
// `pgdcb tail` and snapshots (docs/CONCURRENCY.md, "The tailing horizon").
//
// # The load (a shortcut, documented)
//
// Events are not appended through the store, which would take days at
// 10^8: they are COPYed into events by the schema owner, --tx-events rows
// per transaction (default 1000) with synchronous_commit off, every index
// maintained row by row (--rebuild-indexes drops all but the primary key
// and re-creates them after each size: faster, but a freshly built index is
// denser than one grown by appends). The append-only trigger refuses only
// UPDATE, DELETE and TRUNCATE, so an INSERT or a COPY by the owner is what
// the append function itself does. The log is what serial appends of
// --tx-events events each would have made: position from the identity
// (gapless, checked), transaction_id the loading transaction's real xid
// (never decreasing with position, checked), occurred_at its start, tags
// in the store's canonical order. What differs from real appends: fewer
// distinct transaction ids (one per --tx-events events, where group commit
// makes one per group), and no NOTIFY. Every event has a UUIDv7 event_id,
// as a one-event Append call on the pool gives it (to settle a lost call).
//
// The shape (shape.go): a few hundred types (8 entity kinds × 40, Zipf),
// 2-4 tags per event, background entities interleaved at random (90% with
// 1-30 events, 9.5% 20-200, 0.5% 200-5000), and per size: --probes
// entities of exactly 10 events at random places, two entities of exactly
// --long-events events spread evenly, 1000 events of a type of their own.
// Each size appends its own special entities, so they spread over the part
// of the log that size added.
//
// # The measurements, at each size
//
// After the load: VACUUM ANALYZE (timed; a live log is autovacuumed), the
// log's check, then relation sizes, ReadLast of short entities, a stream
// of the size's 1000-event type, catch-up from the start (ReadTail pages of
// 1000 over the first --catchup events), decisions (Project + AppendIf,
// one call after another: each of the --probes short entities twice, cold
// then warm, without snapshots, counting the events table's blocks read
// from outside shared buffers; --long-decisions on each long entity,
// without snapshots and with a snapshot saved first), Append of one event at 1/8/32 writers
// against the floor of bench (an autocommit one-row INSERT into an
// unindexed copy of events, same run, interleaved, median of --reps),
// `pgdcb tail` latency (append → printed line, the command built from this
// checkout), steps of a user's life run on the live log while 8 writers
// append (ops.go: Migrate, Grant, CREATE/DROP INDEX CONCURRENTLY, a
// projection Reset; each with the longest Append beside it), a base backup
// streamed and thrown away (pg_basebackup -Ft -X none to a pipe: the copy a
// new standby makes), pg_stat_user_tables of events and pg_stat_bgwriter's change
// over the load and the measurements. Decisions and appends add events; the
// next size loads up to its exact count.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
)

// analysisMarker starts the hand-written part of --markdown, kept when the
// page is generated again.
const analysisMarker = "<!-- analysis: written by hand, kept by bench/scale -->"

const defaultDSN = "postgres://postgres@127.0.0.1:5432/postgres"

type options struct {
	sizes          []int64
	dsn            string
	jsonFile       string
	markdown       string
	svg            string
	render         string
	probes         int
	longEvents     int
	longDecisions  int
	samples        int
	catchup        int64
	duration       time.Duration
	warmup         time.Duration
	reps           int
	txEvents       int
	rebuildIndexes bool
	diskCheck      bool
	keep           bool
	loadOnly       bool
	tail           bool
	tailSamples    int
	tailBin        string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("sizes", "1000000,10000000,100000000", "comma-separated log sizes in events, growing, each at least 10000")
	fs.StringVar(&o.dsn, "dsn", "", "PostgreSQL URL of a local server (default: $PGDCB_DATABASE_URL, else "+defaultDSN+")")
	fs.StringVar(&o.jsonFile, "json", "", "write the results (a list, one object per size) to `FILE`, after every size")
	fs.StringVar(&o.markdown, "markdown", "", "write the report (docs/SCALE.md) to `FILE`")
	fs.StringVar(&o.svg, "svg", "", "write the chart of cost against log size to `FILE`, linked from --markdown")
	fs.StringVar(&o.render, "render", "", "measure nothing: render --markdown and --svg from a results `FILE`")
	fs.IntVar(&o.probes, "probes", 1000, "decisions on entities of 10 events per size (one fresh entity each)")
	fs.IntVar(&o.longEvents, "long-events", 10_000, "events of each long entity (at most a tenth of a size's load)")
	fs.IntVar(&o.longDecisions, "long-decisions", 50, "decisions on each long entity per size")
	fs.IntVar(&o.samples, "samples", 1000, "ReadLast calls per size (a twentieth as many type streams)")
	fs.Int64Var(&o.catchup, "catchup", 5_000_000, "events read from the start by the catch-up")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "length of each measured Append repetition")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "length of each Append warm-up")
	fs.IntVar(&o.reps, "reps", 3, "Append repetitions (and of the floor), at least 3")
	fs.IntVar(&o.txEvents, "tx-events", 1000, "events per loading transaction")
	fs.BoolVar(&o.rebuildIndexes, "rebuild-indexes", false, "drop the indexes before each size's load, re-create them after")
	fs.BoolVar(&o.diskCheck, "disk-check", true, "check the free space of the server's data directory (needs a local server)")
	fs.BoolVar(&o.keep, "keep", false, "keep the schema at the end")
	fs.BoolVar(&o.loadOnly, "load-only", false, "load and size each size, measure nothing else (the load rate and bytes per event)")
	fs.BoolVar(&o.tail, "tail", true, "measure `pgdcb tail` latency (builds ./cmd/pgdcb)")
	fs.IntVar(&o.tailSamples, "tail-samples", 20, "appends whose `pgdcb tail` latency is measured per size")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--sizes: %q: %w", f, err)
		}
		if n < 10_000 || (len(o.sizes) > 0 && n <= o.sizes[len(o.sizes)-1]) {
			return nil, fmt.Errorf("--sizes: %d: sizes must grow and be at least 10000", n)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.reps < 3 {
		return nil, fmt.Errorf("--reps %d: at least 3 are needed for a median", o.reps)
	}
	if o.probes < 1 || o.longDecisions < 1 || o.samples < 1 || o.txEvents < 1 || o.catchup < 1 || o.duration <= 0 {
		return nil, errors.New("--probes, --long-decisions, --samples, --tx-events, --catchup and --duration must be positive")
	}
	if o.render != "" && o.markdown == "" && o.svg == "" {
		return nil, errors.New("--render needs --markdown or --svg")
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
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "scale:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, time.Now().Format("15:04:05 ")+format+"\n", a...)
	}
	if o.render != "" {
		rs, err := readJSON(o.render)
		if err != nil {
			return err
		}
		return writeReport(o, rs, logf)
	}
	rs, err := study(ctx, o, logf)
	if len(rs) > 0 {
		if werr := writeReport(o, rs, logf); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

func writeReport(o *options, rs []*SizeResult, logf func(string, ...any)) error {
	link := ""
	if o.svg != "" {
		if err := os.WriteFile(o.svg, []byte(chartSVG(rs)), 0o644); err != nil {
			return err
		}
		logf("wrote %s", o.svg)
		link = o.svg
		if o.markdown != "" {
			if rel, err := filepath.Rel(filepath.Dir(o.markdown), o.svg); err == nil {
				link = filepath.ToSlash(rel)
			}
		}
	}
	if o.markdown != "" {
		page := markdown(rs, link)
		// The reading of the figures is written by hand below the marker
		// and kept when the page is generated again.
		if old, err := os.ReadFile(o.markdown); err == nil {
			if i := strings.Index(string(old), analysisMarker); i >= 0 {
				page += "\n" + string(old[i:])
			}
		}
		if err := os.WriteFile(o.markdown, []byte(page), 0o644); err != nil {
			return err
		}
		logf("wrote %s", o.markdown)
	}
	return nil
}

// study loads and measures every size; it returns the sizes measured, also
// when it stops early (the error says why).
func study(ctx context.Context, o *options, logf func(string, ...any)) (rs []*SizeResult, err error) {
	cfg, err := pgxpool.ParseConfig(o.dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	machine, dataDir, reserve, err := describe(ctx, pool)
	if err != nil {
		return nil, err
	}
	// The disk check, before anything of the study is created.
	var dk *disk
	if o.diskCheck {
		dk = &disk{dir: dataDir, reserve: reserve}
		bpe, err := sampleBytesPerEvent(ctx, pool, o.txEvents, logf)
		if err != nil {
			return nil, err
		}
		last := o.sizes[len(o.sizes)-1]
		need, free, err := dk.check(last, bpe)
		if err != nil {
			return nil, err
		}
		logf("disk: %.0f bytes/event in a sample of %d; %s events need %s of %s free", bpe, sampleEvents, sizeName(last), gib(need), gib(free))
	}
	if o.tail {
		bin, cleanup, err := buildTail(ctx)
		if err != nil {
			logf("no `pgdcb tail` latency: %v", err)
		} else {
			defer cleanup()
			o.tailBin = bin
		}
	}
	schema, err := newSchema(ctx, pool)
	defer func() {
		if schema == "" {
			return
		}
		if o.keep {
			logf("kept schema %s", schema)
			return
		}
		if derr := dropSchema(ctx, pool, schema); derr != nil {
			logf("dropping %s: %v", schema, derr)
		} else {
			logf("dropped schema %s", schema)
		}
	}()
	if err != nil {
		return nil, err
	}
	logf("schema %s; sizes %v; %s", schema, o.sizes, machine)
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	defer store.Close(context.WithoutCancel(ctx)) //nolint:errcheck
	runKind := "validation"
	if o.sizes[len(o.sizes)-1] >= 100_000_000 {
		runKind = "study"
	}
	target := o.sizes[len(o.sizes)-1]
	var (
		have    int64 // events in the log
		lastPos int64 // the log's largest position
	)
	for stage, n := range o.sizes {
		if n <= have {
			return rs, fmt.Errorf("size %d: the log already holds %d events (the measurements of the size before appended them)", n, have)
		}
		spec := stageSpec{Stage: stage, From: have, Count: n - have, Seed: 39,
			Probes:     min(o.probes, int((n-have)/(probeEvents*20))),
			LongEvents: min(o.longEvents, int((n-have)/10))}
		r := &SizeResult{Run: runKind, Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), Machine: machine, Events: n, LoadTxEvents: o.txEvents}
		if dk != nil && stage > 0 {
			// Bytes per event measured on the whole log.
			if _, _, err := dk.check(target-have, rs[len(rs)-1].BytesPerEvent); err != nil {
				return rs, err
			}
		}
		if dk != nil {
			r.FreeBytesBefore, _ = dk.free()
		}
		logf("size %s: loading %d events (%d probes, 2 entities of %d events)", sizeName(n), spec.Count, spec.Probes, spec.LongEvents)
		ld := &loader{pool: pool, schema: schema, txEvents: o.txEvents, rebuild: o.rebuildIndexes, disk: dk, logf: logf}
		bgLoad, err := bgwriter(ctx, pool)
		if err != nil {
			return rs, err
		}
		st, err := ld.load(ctx, spec)
		if err != nil {
			return rs, fmt.Errorf("loading size %s: %w", sizeName(n), err)
		}
		r.LoadedEvents, r.LoadSeconds, r.IndexBuildSecs = st.Events, st.Seconds, st.IndexSeconds
		r.LoadEventsPerS = float64(st.Events) / st.Seconds
		r.LoadServerCPU, r.LoadClientCPU = st.ServerCPU, st.ClientCPU
		t0 := time.Now()
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE `+pgx.Identifier{schema, "events"}.Sanitize()); err != nil {
			return rs, err
		}
		r.VacuumSeconds = time.Since(t0).Seconds()
		if r.LoadBgwriter, err = bgwriterSince(ctx, pool, bgLoad); err != nil {
			return rs, err
		}
		if r.StageXids, err = checkLog(ctx, pool, schema, lastPos, spec.Count); err != nil {
			return rs, err
		}
		loadEnd := lastPos + spec.Count // gapless, checked
		logf("size %s: loaded in %.0fs (%.0f events/s; CPU: loading backend %.0fs, this program %.0fs; index re-creation %.0fs), VACUUM ANALYZE %.1fs",
			sizeName(n), st.Seconds, r.LoadEventsPerS, st.ServerCPU, st.ClientCPU, st.IndexSeconds, r.VacuumSeconds)
		m := &meter{o: o, pool: pool, store: store, schema: schema, spec: spec, events: n, logf: logf}
		if err := m.sizes(ctx, r); err != nil {
			return rs, err
		}
		r.BytesPerEvent = float64(r.TableBytes+r.IndexBytes+r.ToastBytes) / float64(n)
		if o.loadOnly {
			lastPos, have = loadEnd, n
			rs = append(rs, r)
			logf("size %s: %.0f bytes/event", sizeName(n), r.BytesPerEvent)
			continue
		}
		r.LoadAvg = loadAvg()
		bgMeasure, err := bgwriter(ctx, pool)
		if err != nil {
			return rs, err
		}
		for _, step := range []struct {
			name string
			fn   func(context.Context, *SizeResult) error
		}{{"reads", m.reads}, {"decisions", m.decisions}, {"appends", m.appends}, {"ops", m.ops}} {
			t0 := time.Now()
			if err := step.fn(ctx, r); err != nil {
				return rs, fmt.Errorf("size %s, %s: %w", sizeName(n), step.name, err)
			}
			logf("size %s: %s in %.0fs", sizeName(n), step.name, time.Since(t0).Seconds())
		}
		if o.tailBin == "" {
			r.TailError = "not measured"
		} else if err := m.tail(ctx, r); err != nil {
			if ctx.Err() != nil {
				return rs, ctx.Err()
			}
			r.TailError = err.Error()
			logf("size %s: tail: %v", sizeName(n), err)
		}
		if err := m.baseBackup(ctx, r); err != nil {
			if ctx.Err() != nil {
				return rs, ctx.Err()
			}
			r.BaseBackupError = err.Error()
			logf("size %s: base backup: %v", sizeName(n), err)
		} else {
			logf("size %s: base backup of %s in %.0fs", sizeName(n), mib(r.BaseBackupBytes), r.BaseBackupSeconds)
		}
		if r.MeasureBgwriter, err = bgwriterSince(ctx, pool, bgMeasure); err != nil {
			return rs, err
		}
		if r.Table, err = tableStats(ctx, pool, schema); err != nil {
			return rs, err
		}
		var added int64
		if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(max(position), $1) FROM `+pgx.Identifier{schema, "events"}.Sanitize()+` WHERE position > $1`, loadEnd).
			Scan(&added, &lastPos); err != nil {
			return rs, err
		}
		have = n + added
		rs = append(rs, r)
		logf("size %s: decision p50 %.2f ms (10k events with snapshot %.2f, without %.2f); Append ÷ floor at 8 writers %.2f; %.0f bytes/event",
			sizeName(n), r.DecisionP50Ms, r.DecisionLongP50Ms, r.DecisionLongNoSnapP50Ms, r.AppendRatioW8, r.BytesPerEvent)
		if o.jsonFile != "" {
			if err := writeJSON(o.jsonFile, rs); err != nil {
				return rs, err
			}
		}
	}
	return rs, nil
}
