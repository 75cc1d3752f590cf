package logical_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// Environment of the benchmarks.
const (
	// BacklogEnv sets the catch-up backlog (default 200k events).
	BacklogEnv = "PGDCB_BENCH_BACKLOG"
	// RateEnv and SecondsEnv set the live load (default 2000 events/s for 5 s).
	RateEnv    = "PGDCB_BENCH_RATE"
	SecondsEnv = "PGDCB_BENCH_SECONDS"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// counting is a handler that counts what it handled (and writes nothing but
// the checkpoint), so that the figures are the read path's.
func counting(n *atomic.Int64) projection.Handler {
	return func(_ context.Context, _ pgx.Tx, evs []pgdcb.StoredEvent) error {
		n.Add(int64(len(evs)))
		return nil
	}
}

func runProjection(b *testing.B, store *eventstore.Store, name string, h projection.Handler, logicalMode bool) (stop func()) {
	cfg := &projection.Config{BatchSize: 1000, ReaderConfig: projection.ReaderConfig{PollInterval: 10 * time.Millisecond, HeartbeatInterval: time.Second}}
	if logicalMode {
		cfg.Logical = &logical.Config{}
		useSlot(store, name)
	}
	r, err := projection.New(store, name, query.All(), h, cfg)
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		require.ErrorIs(b, <-done, context.Canceled)
	}
}

func waitCount(b *testing.B, n *atomic.Int64, want int64) {
	end := time.Now().Add(10 * time.Minute)
	for n.Load() < want {
		if time.Now().After(end) {
			b.Fatalf("handled %d of %d", n.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkLogicalCatchUp: events/s through a projection (no-op handler,
// batches of 1000) over a backlog loaded in transactions of 1000 events:
// the tail read (the baseline), the logical stream of a slot that existed
// before the backlog, and a new logical projection's initial snapshot read.
//
//	go test -run '^$' -bench LogicalCatchUp -benchtime 1x ./logical
func BenchmarkLogicalCatchUp(b *testing.B) {
	n := envInt(BacklogEnv, 200_000)
	store, pool := newStore(b)
	ctx := context.Background()

	// The stream's slot exists before the backlog.
	var lg atomic.Int64
	stop := runProjection(b, store, "stream", counting(&lg), true)
	_, err := store.Append(ctx, []pgdcb.Event{event(b, "E", "k=v")})
	require.NoError(b, err)
	waitCount(b, &lg, 1)
	stop()

	for from := 0; from < n; from += 1000 {
		_, err := pool.Exec(ctx, `INSERT INTO `+ident.Schema(store)+`.events (type, tags, data)
			SELECT 'E', ARRAY['item=' || (g % 1000)], jsonb_build_object('n', g) FROM generate_series($1::int, $2::int) g`,
			from, min(n, from+1000)-1)
		require.NoError(b, err)
	}
	_, err = pool.Exec(ctx, `ANALYZE `+ident.Schema(store)+`.events`)
	require.NoError(b, err)
	total := int64(n + 1)

	measure := func(name string, counter *atomic.Int64, want int64, logicalMode bool) float64 {
		start := time.Now()
		stop := runProjection(b, store, name, counting(counter), logicalMode)
		waitCount(b, counter, want)
		d := time.Since(start)
		stop()
		return float64(n) / d.Seconds()
	}
	b.ResetTimer()
	var tl, li atomic.Int64
	tail := measure("tail", &tl, total, false)
	lg.Store(0)
	stream := measure("stream", &lg, int64(n), true)
	initial := measure("initial", &li, total, true)
	b.ReportMetric(tail, "tail-ev/s")
	b.ReportMetric(stream, "stream-ev/s")
	b.ReportMetric(initial, "initial-ev/s")
	b.ReportMetric(stream/tail, "stream/tail")
	b.ReportMetric(initial/tail, "initial/tail")
}

// liveRun is one measured run of live delivery.
type liveRun struct {
	lats, acks []time.Duration
	sent       int64
	// The stages of a logical delivery (traceDelivery), per event: append
	// acknowledged → the server sent its commit, → the reader received it,
	// → Next handed it out, → the handler had it.
	ackSent, sentRecv, recvHanded, handedHandler []time.Duration
}

// stages pairs the trace of each event (by position) with its
// acknowledgement (by its Sent time).
type stages struct {
	mu    sync.Mutex
	trace map[int64][3]time.Time // position → sent, received, handed
	acked map[int64]time.Time    // Sent → append returned
}

func (l *liveRun) pct(ds []time.Duration, p float64) float64 {
	slices.Sort(ds)
	return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
}

// runLive starts a projection (logical or tail) and appends at rate for secs
// seconds with 8 appenders (one event per append); hold, when set, runs once
// the projection streams and before the load.
func runLive(b *testing.B, store *eventstore.Store, name string, logicalMode bool, rate, secs int, hold func()) *liveRun {
	ctx := context.Background()
	run := &liveRun{}
	began := time.Now().UnixNano() // events of earlier runs are not this run's
	var (
		mu   sync.Mutex
		seen atomic.Int64
		st   = stages{trace: map[int64][3]time.Time{}, acked: map[int64]time.Time{}}
	)
	if logicalMode {
		logical.SetTraceDelivery(func(ev *pgdcb.StoredEvent, sent, received, handed time.Time) {
			st.mu.Lock()
			st.trace[ev.Position] = [3]time.Time{sent, received, handed}
			st.mu.Unlock()
		})
		defer logical.SetTraceDelivery(nil)
	}
	h := func(_ context.Context, _ pgx.Tx, evs []pgdcb.StoredEvent) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			var d struct{ Sent int64 }
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return err
			}
			if d.Sent > began {
				run.lats = append(run.lats, now.Sub(time.Unix(0, d.Sent)))
				st.mu.Lock()
				tr, ok := st.trace[ev.Position]
				ack, aok := st.acked[d.Sent]
				st.mu.Unlock()
				if ok && aok {
					run.ackSent = append(run.ackSent, tr[0].Sub(ack))
					run.sentRecv = append(run.sentRecv, tr[1].Sub(tr[0]))
					run.recvHanded = append(run.recvHanded, tr[2].Sub(tr[1]))
					run.handedHandler = append(run.handedHandler, now.Sub(tr[2]))
				}
			}
		}
		seen.Add(int64(len(evs)))
		return nil
	}
	before, err := store.ReadTail(ctx, query.All(), cursor.Start, 0)
	require.NoError(b, err)
	stop := runProjection(b, store, name, h, logicalMode)
	defer stop()
	_, err = store.Append(ctx, []pgdcb.Event{event(b, "E", "k=v")})
	require.NoError(b, err)
	waitCount(b, &seen, int64(len(before.Events))+1) // delivering (logical: the slot exists)
	if hold != nil {
		hold()
	}
	const writers = 8
	per := time.Duration(float64(time.Second) * writers / float64(rate))
	end := time.Now().Add(time.Duration(secs) * time.Second)
	var (
		sent atomic.Int64
		wg   sync.WaitGroup
		amu  sync.Mutex
	)
	tags := event(b, "E", "k=v").Tags
	for range writers {
		wg.Go(func() {
			next := time.Now()
			for next.Before(end) {
				time.Sleep(time.Until(next))
				next = next.Add(per)
				t0 := time.Now()
				data, _ := json.Marshal(map[string]int64{"Sent": t0.UnixNano()})
				if _, err := store.Append(ctx, []pgdcb.Event{{Type: "E", Tags: tags, Data: data}}); err != nil {
					b.Error(err)
					return
				}
				acked := time.Now()
				amu.Lock()
				run.acks = append(run.acks, acked.Sub(t0)) // append → acknowledged: the floor of delivery latency
				amu.Unlock()
				st.mu.Lock()
				st.acked[t0.UnixNano()] = acked
				st.mu.Unlock()
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	run.sent = sent.Load()
	waitCount(b, &seen, int64(len(before.Events))+1+run.sent)
	mu.Lock()
	defer mu.Unlock()
	return run
}

// BenchmarkLogicalLiveLatency: append → handler latency at a steady rate (8
// appenders, one event per append, default 2000 events/s for 5 s) of a
// logical projection while a transaction of the same database holds an xid
// for the whole run, against the same load through the default tail read
// with no transaction open (its best case) in the same run. With the holder
// open, the tail read delivers none of the run's events (tail-delivered).
//
//	go test -run '^$' -bench LogicalLiveLatency -benchtime 1x ./logical
func BenchmarkLogicalLiveLatency(b *testing.B) {
	rate := envInt(RateEnv, 2000)
	secs := envInt(SecondsEnv, 5)
	store, pool := newStore(b)
	ctx := context.Background()
	b.ResetTimer()

	base := runLive(b, store, "tail", false, rate, secs, nil)

	var (
		holder pgx.Tx
		head   pgdcb.TailBatch
	)
	lg := runLive(b, store, "live", true, rate, secs, func() {
		var err error
		holder, err = pool.Begin(ctx)
		require.NoError(b, err)
		require.NoError(b, holder.QueryRow(ctx, `SELECT pg_current_xact_id()`).Scan(new(uint64)))
		head, err = store.ReadTail(ctx, query.All(), cursor.Start, 0)
		require.NoError(b, err)
	})
	b.StopTimer()
	defer holder.Rollback(context.Background())
	// The holder is still open, and the tail read is held below it.
	var still *uint64
	require.NoError(b, holder.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()`).Scan(&still))
	require.NotNil(b, still)
	tb, err := store.ReadTail(ctx, query.All(), head.Cursor, 0)
	require.NoError(b, err)

	b.ReportMetric(float64(lg.sent)/float64(secs), "ev/s")
	b.ReportMetric(lg.pct(lg.lats, 0.5), "p50-ms")
	b.ReportMetric(lg.pct(lg.lats, 0.99), "p99-ms")
	b.ReportMetric(lg.pct(lg.acks, 0.99), "append-p99-ms")
	b.ReportMetric(base.pct(base.lats, 0.5), "tail-nohold-p50-ms")
	b.ReportMetric(base.pct(base.lats, 0.99), "tail-nohold-p99-ms")
	b.ReportMetric(base.pct(base.acks, 0.99), "tail-run-append-p99-ms")
	b.ReportMetric(float64(len(tb.Events)), "tail-delivered")
	if len(lg.sentRecv) > 0 {
		// Where the logical delivery's time goes (the acknowledgement can
		// come after the server sent the commit: negative values).
		for _, st := range []struct {
			name string
			ds   []time.Duration
		}{{"ack-to-sent", lg.ackSent}, {"sent-to-recv", lg.sentRecv}, {"recv-to-next", lg.recvHanded}, {"next-to-handler", lg.handedHandler}} {
			b.ReportMetric(lg.pct(st.ds, 0.5), st.name+"-p50-ms")
			b.ReportMetric(lg.pct(st.ds, 0.99), st.name+"-p99-ms")
		}
	}
}

// BenchmarkLogicalCatchUpSQL: a backlog (transactions of 1000 events, the
// bench row's payload) read by a logical.Reader (no handler, batches of
// 1000) from a slot that existed before it: through the stream, and
// through the SQL interface (a catch-up) in calls of several chunk sizes;
// and the server's share, measured in SQL on copies of the slot: a whole
// pgoutput decoding in text and in binary (count(*) of
// pg_logical_slot_peek_binary_changes), a decoding that outputs nothing (a
// copy moved to the end first: what each call of a catch-up decodes again
// from the restart point) and the move itself (pg_replication_slot_advance).
// The WAL per event says how large a backlog Config.CatchUpBytes is.
//
//	PGDCB_BENCH_BACKLOG=1000000 go test -run '^$' -bench LogicalCatchUpSQL -benchtime 1x ./logical
func BenchmarkLogicalCatchUpSQL(b *testing.B) {
	n := envInt(BacklogEnv, 200_000)
	store, pool := newStore(b)
	ctx := context.Background()
	useSlot(store, "r")
	slot := logical.SlotName(store.Schema(), "r")
	rd, err := logical.Open(ctx, store, "r", query.All(), logical.Checkpoint{}, cursor.Start, nil)
	require.NoError(b, err)
	bt, err := rd.Next(ctx, 10, 10*time.Millisecond)
	require.NoError(b, err)
	require.NoError(b, rd.Close(ctx))
	from, tail := bt.Checkpoint, bt.Tail

	var w0, w1 int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&w0))
	for lo := 1; lo <= n; lo += 1000 {
		_, err := pool.Exec(ctx, `INSERT INTO `+ident.Schema(store)+`.events (type, tags, data)
			SELECT 'BenchEvent' || (g % 7), ARRAY['entity=' || (g % 1000), 'shard=' || (g % 16)],
			       jsonb_build_object('n', g, 'amount', g % 1000, 'note', 'benchmark fixture payload')
			  FROM generate_series($1::bigint, $2::bigint) AS g`, lo, min(lo+999, n))
		require.NoError(b, err)
	}
	require.NoError(b, pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&w1))

	read := func(cfg *logical.Config) float64 {
		start := time.Now()
		rd, err := logical.Open(ctx, store, "r", query.All(), from, tail, cfg)
		require.NoError(b, err)
		defer rd.Close(ctx)
		got := 0
		for got < n {
			bt, err := rd.Next(ctx, 1000, 100*time.Millisecond)
			require.NoError(b, err)
			got += len(bt.Events)
		}
		return float64(n) / time.Since(start).Seconds()
	}
	sqlTime := func(pre, q string) float64 {
		conn, err := pool.Acquire(ctx)
		require.NoError(b, err)
		defer conn.Release()
		tmp := slot + "_bench"
		_, err = conn.Exec(ctx, `SELECT pg_copy_logical_replication_slot($1, $2, false)`, slot, tmp)
		require.NoError(b, err)
		defer conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, tmp) //nolint:errcheck
		if pre != "" {
			_, err = conn.Exec(ctx, pre, tmp)
			require.NoError(b, err)
		}
		start := time.Now()
		_, err = conn.Exec(ctx, q, tmp)
		require.NoError(b, err)
		return time.Since(start).Seconds()
	}
	b.ResetTimer() // (it also deletes the metrics reported so far)
	b.ReportMetric(float64(w1-w0)/float64(n), "WAL-B/ev")
	b.ReportMetric(read(&logical.Config{CatchUpBytes: 1 << 50}), "stream-ev/s")
	for _, chunk := range []int{50_000, 200_000, 500_000, 2_000_000} {
		b.ReportMetric(read(&logical.Config{CatchUpBytes: 1, CatchUpChunk: chunk}), "sql-"+strconv.Itoa(chunk/1000)+"k-ev/s")
	}
	pub := "'publication_names', '" + logical.PublicationName(store.Schema()) + "'"
	peek := `SELECT count(*) FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', ` + pub
	advance := `SELECT pg_replication_slot_advance($1, pg_current_wal_flush_lsn())`
	b.ReportMetric(1e6*sqlTime("", peek+`)`)/float64(n), "text-decode-µs/ev")
	b.ReportMetric(1e6*sqlTime("", peek+`, 'binary', 'true')`)/float64(n), "binary-decode-µs/ev")
	b.ReportMetric(1e6*sqlTime("", advance)/float64(n), "advance-µs/ev")
	b.ReportMetric(1e6*sqlTime(advance, peek+`, 'binary', 'true')`)/float64(n), "redecode-µs/ev")
}
