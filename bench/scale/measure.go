package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// meter measures one log size; every measurement reads or writes through
// store (the default configuration: group commit on).
type meter struct {
	o      *options
	pool   *pgxpool.Pool
	store  *eventstore.Store
	schema string
	spec   stageSpec // the stage just loaded: its special entities
	events int64     // the log's size when the measurements start
	logf   func(string, ...any)
}

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	c := slices.Clone(ds)
	slices.Sort(c)
	rank := max(1, int(math.Ceil(p/100*float64(len(c)))))
	return float64(c[rank-1]) / float64(time.Millisecond)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	c := slices.Clone(xs)
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

// countModel folds an entity into its number of events.
func countModel(tag string) *pgdcb.Model[int] {
	return pgdcb.NewModel(query.Tagged(nil, tag), 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
}

func decisionEvent(tag string, seq int) pgdcb.Event {
	return pgdcb.Event{Type: "AccountE05", Tags: tags.MustParseSet(tag, "tenant=0"),
		Data: json.RawMessage(`{"decision":` + strconv.Itoa(seq) + `}`)}
}

// decide is one decision: Project the entity, check its size, AppendIf
// after the read's cursor.
func (m *meter) decide(ctx context.Context, tag string, model *pgdcb.Model[int], want, seq int) error {
	model.State = 0
	cond, err := m.store.Project(ctx, model)
	if err != nil {
		return err
	}
	if model.State != want {
		return fmt.Errorf("SELF-CHECK FAILED: the decision folded %d events of %s, want %d", model.State, tag, want)
	}
	if _, err := m.store.AppendIf(ctx, []pgdcb.Event{decisionEvent(tag, seq)}, cond); err != nil {
		return fmt.Errorf("decision on %s: %w", tag, err)
	}
	return nil
}

// decisions measures decisions on fresh probe entities of exactly 10 events
// (no snapshot name), then on the two long entities: "off" without
// snapshots, "on" with a snapshot saved first.
func (m *meter) decisions(ctx context.Context, r *SizeResult) error {
	// Two passes over the same entities: the first finds their pages where
	// the load left them (in memory or not: a log larger than the memory
	// keeps most of its old pages on disk), the second right after, warm.
	// Each pass counts the events table's blocks read from outside shared
	// buffers (pg_statio_user_tables, after the backends' stats flush).
	for pass, want := range []int{probeEvents, probeEvents + 1} {
		b0, err := m.blocksRead(ctx)
		if err != nil {
			return err
		}
		var short []time.Duration
		for i := range m.spec.Probes {
			tag := probeTag(m.spec.Stage, i)
			model := countModel(tag)
			t0 := time.Now()
			if err := m.decide(ctx, tag, model, want, pass*m.spec.Probes+i); err != nil {
				return err
			}
			short = append(short, time.Since(t0))
		}
		b1, err := m.blocksRead(ctx)
		if err != nil {
			return err
		}
		perDecision := float64(b1-b0) / float64(len(short))
		if pass == 0 {
			r.DecisionSamples = len(short)
			r.DecisionP50Ms, r.DecisionP99Ms = pct(short, 50), pct(short, 99)
			r.DecisionBlocksRead = perDecision
		} else {
			r.DecisionWarmP50Ms, r.DecisionWarmP99Ms = pct(short, 50), pct(short, 99)
			r.DecisionWarmBlocksRead = perDecision
		}
	}
	if m.spec.LongEvents == 0 {
		return nil
	}
	r.LongEntityEvents = m.spec.LongEvents
	n := m.o.longDecisions
	for _, snap := range []bool{false, true} {
		which := map[bool]string{false: "off", true: "on"}[snap]
		tag := longTag(m.spec.Stage, which)
		model := countModel(tag)
		if snap {
			model.WithSnapshots("scale-count", 1)
			if err := m.store.SaveSnapshot(ctx, model); err != nil {
				return fmt.Errorf("saving the long entity's snapshot: %w", err)
			}
		}
		before := m.store.SnapshotStats()
		var lats []time.Duration
		for i := range n {
			t0 := time.Now()
			if err := m.decide(ctx, tag, model, m.spec.LongEvents+i, i); err != nil {
				return err
			}
			lats = append(lats, time.Since(t0))
		}
		if snap {
			r.DecisionLongP50Ms, r.DecisionLongP99Ms = pct(lats, 50), pct(lats, 99)
			if loaded := m.store.SnapshotStats().Loaded - before.Loaded; loaded < int64(n) {
				return fmt.Errorf("SELF-CHECK FAILED: %d of %d decisions with snapshots started from one", loaded, n)
			}
		} else {
			r.DecisionLongNoSnapP50Ms, r.DecisionLongNoSnapP99Ms = pct(lats, 50), pct(lats, 99)
		}
	}
	r.DecisionLongSamples = n
	return nil
}

// statsFlush is how long the study waits for idle backends to report their
// I/O counters (PostgreSQL 15 flushes them at most once a second).
const statsFlush = 2 * time.Second

// blocksRead is the events table's heap and index blocks read from outside
// shared buffers so far, as reported after the backends' stats flush.
func (m *meter) blocksRead(ctx context.Context) (int64, error) {
	select {
	case <-time.After(statsFlush):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	var n int64
	err := m.pool.QueryRow(ctx, `SELECT coalesce(heap_blks_read, 0) + coalesce(idx_blks_read, 0)
		  FROM pg_statio_user_tables WHERE relid = $1::regclass`, pgx.Identifier{m.schema, "events"}.Sanitize()).Scan(&n)
	return n, err
}

// reads measures ReadLast of probe entities (before any decision touched
// them), the stage's marker type stream and catch-up from the start.
func (m *meter) reads(ctx context.Context, r *SizeResult) error {
	rng := rand.New(rand.NewPCG(7, uint64(m.spec.Stage)))
	var lats []time.Duration
	for range m.o.samples {
		tag := probeTag(m.spec.Stage, rng.IntN(m.spec.Probes))
		t0 := time.Now()
		ev, _, err := m.store.ReadLast(ctx, query.Tagged(nil, tag))
		if err != nil {
			return err
		}
		lats = append(lats, time.Since(t0))
		if ev == nil || ev.Type != "AccountE09" {
			return fmt.Errorf("SELF-CHECK FAILED: ReadLast of %s returned %v, want its 10th event", tag, ev)
		}
	}
	r.ReadLastP50Ms, r.ReadLastP99Ms = pct(lats, 50), pct(lats, 99)

	lats = lats[:0]
	q := query.New(query.Item{Types: []string{markerType(m.spec.Stage)}})
	want := m.spec.markers()
	for range max(3, m.o.samples/20) {
		t0 := time.Now()
		n := 0
		for _, err := range m.store.Read(ctx, q, nil).All() {
			if err != nil {
				return err
			}
			n++
		}
		lats = append(lats, time.Since(t0))
		if n != want {
			return fmt.Errorf("SELF-CHECK FAILED: the type stream read %d events, want %d", n, want)
		}
	}
	r.TypeStreamEvents = want
	r.TypeStreamP50Ms, r.TypeStreamP99Ms = pct(lats, 50), pct(lats, 99)

	// Catch-up: ReadTail pages of 1000 from the start, as a subscription
	// catching up does, over the first --catchup events (or the whole log).
	limit := min(m.events, m.o.catchup)
	var (
		cur  cursor.Cursor
		read int64
		last cursor.Cursor
	)
	t0 := time.Now()
	for read < limit {
		b, err := m.store.ReadTail(ctx, query.All(), cur, int(min(1000, limit-read)))
		if err != nil {
			return err
		}
		if len(b.Events) == 0 {
			return fmt.Errorf("catch-up stopped after %d of %d events: a transaction of this database holds an xid older than the log's (docs/CONCURRENCY.md, \"The tailing horizon\"; run the study in a database of its own)", read, limit)
		}
		for _, e := range b.Events {
			at := cursor.Cursor{TransactionID: e.TransactionID, Position: e.Position}
			if at.TransactionID < last.TransactionID || (at.TransactionID == last.TransactionID && at.Position <= last.Position) {
				return fmt.Errorf("SELF-CHECK FAILED: catch-up delivered %v after %v, out of log order", at, last)
			}
			last = at
		}
		read += int64(len(b.Events))
		cur = b.Cursor
	}
	r.CatchupEvents = read
	r.CatchupEventsPerS = float64(read) / time.Since(t0).Seconds()
	return nil
}

// appends measures Append of one event at 1, 8 and 32 writers against the
// floor (bench/env.go's: an autocommit one-row INSERT into floor_events),
// interleaved: warm-up of each, then reps × (Append, floor).
func (m *meter) appends(ctx context.Context, r *SizeResult) error {
	floorSQL := `INSERT INTO ` + pgx.Identifier{m.schema, "floor_events"}.Sanitize() + ` (type, tags, data) VALUES ($1, $2::text[], $3::jsonb)`
	for _, w := range []int{1, 8, 32} {
		op := func(ctx context.Context, w int, seq int64) error {
			_, err := m.store.Append(ctx, []pgdcb.Event{benchEvent(m.spec.Stage, w, seq)})
			return err
		}
		floor := func(ctx context.Context, w int, seq int64) error {
			e := benchEvent(m.spec.Stage, w, seq)
			_, err := m.pool.Exec(ctx, floorSQL, e.Type, e.Tags.Strings(), string(e.Data))
			return err
		}
		var seqA, seqF atomic.Int64
		if _, err := runWriters(ctx, w, m.o.warmup, &seqA, op); err != nil {
			return err
		}
		if _, err := runWriters(ctx, w, m.o.warmup, &seqF, floor); err != nil {
			return err
		}
		var rates, floors []float64
		var lats []time.Duration
		for range m.o.reps {
			s, err := runWriters(ctx, w, m.o.duration, &seqA, op)
			if err != nil {
				return err
			}
			rates = append(rates, s.rate)
			lats = append(lats, s.lats...)
			f, err := runWriters(ctx, w, m.o.duration, &seqF, floor)
			if err != nil {
				return fmt.Errorf("floor: %w", err)
			}
			floors = append(floors, f.rate)
		}
		row := AppendRow{Writers: w, EventsPerS: median(rates), FloorEventsPerS: median(floors), P50Ms: pct(lats, 50), P99Ms: pct(lats, 99)}
		if row.FloorEventsPerS > 0 {
			row.Ratio = row.EventsPerS / row.FloorEventsPerS
		}
		r.Appends = append(r.Appends, row)
		if w == 8 {
			r.AppendRatioW8 = row.Ratio
		}
	}
	return nil
}

// benchEvent is bench/workloads_write.go's event: two tags, about 60 bytes
// of JSON.
func benchEvent(stage, w int, seq int64) pgdcb.Event {
	ts := tags.MustParseSet("account=a"+strconv.Itoa(stage)+"-"+strconv.Itoa(w)+"-"+strconv.FormatInt(seq%100, 10), "writer="+strconv.Itoa(w))
	return pgdcb.Event{Type: "BenchAppended", Tags: ts, Data: json.RawMessage(`{"n":` + strconv.FormatInt(seq, 10) + `,"amount":42,"note":"benchmark payload"}`)}
}

type runSample struct {
	rate float64
	lats []time.Duration
}

// runWriters runs op on writers goroutines for d and returns the calls per
// second over the wall time and every call's latency; seq numbers calls
// across runs. The first error stops the run.
func runWriters(ctx context.Context, writers int, d time.Duration, seq *atomic.Int64, op func(context.Context, int, int64) error) (runSample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		out   runSample
		calls atomic.Int64
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lats []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := op(ctx, w, seq.Add(1)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				lats = append(lats, time.Since(t0))
				calls.Add(1)
			}
			mu.Lock()
			out.lats = append(out.lats, lats...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if first != nil {
		return out, first
	}
	out.rate = float64(calls.Load()) / time.Since(start).Seconds()
	return out, ctx.Err()
}

// tail measures `pgdcb tail` latency: the time from an Append's return
// call's start to the line the command prints, for events appended one at a
// time after the head, with the command built from this checkout.
func (m *meter) tail(ctx context.Context, r *SizeResult) error {
	if m.o.tailBin == "" {
		return errors.New("no pgdcb binary (--tail-bin)")
	}
	head, err := m.store.Head(ctx)
	if err != nil {
		return err
	}
	tag := "scale=tail-" + strconv.Itoa(m.spec.Stage)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.o.tailBin, "-dsn", m.o.dsn, "-schema", m.schema, "tail", "-after", head.String(), "-query", ":"+tag)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan time.Time, 16)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- time.Now()
		}
		close(lines)
	}()
	ev := pgdcb.Event{Type: "ScaleTail", Tags: tags.MustParseSet(tag), Data: json.RawMessage(`{}`)}
	var lats []time.Duration
	for i := range m.o.tailSamples + 1 {
		t0 := time.Now()
		if _, err := m.store.Append(ctx, []pgdcb.Event{ev}); err != nil {
			return err
		}
		select {
		case at, ok := <-lines:
			if !ok {
				return fmt.Errorf("pgdcb tail exited: %s", stderr.String())
			}
			if i > 0 { // the first one waits for the command to start
				lats = append(lats, at.Sub(t0))
			}
		case <-time.After(30 * time.Second):
			return errors.New("pgdcb tail printed nothing within 30s of an append")
		}
	}
	r.TailSamples = len(lats)
	r.TailP50Ms, r.TailP99Ms = pct(lats, 50), pct(lats, 99)
	return nil
}

// sizes reads the events table's relation sizes.
func (m *meter) sizes(ctx context.Context, r *SizeResult) error {
	t := pgx.Identifier{m.schema, "events"}.Sanitize()
	if err := m.pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass), pg_indexes_size($1::regclass),
		       coalesce(pg_total_relation_size(reltoastrelid), 0) FROM pg_class WHERE oid = $1::regclass`, t).
		Scan(&r.TableBytes, &r.IndexBytes, &r.ToastBytes); err != nil {
		return err
	}
	rows, err := m.pool.Query(ctx, `SELECT c.relname, pg_relation_size(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass`, t)
	if err != nil {
		return err
	}
	r.Indexes = map[string]int64{}
	for rows.Next() {
		var name string
		var b int64
		if err := rows.Scan(&name, &b); err != nil {
			return err
		}
		r.Indexes[name] = b
	}
	return rows.Err()
}
