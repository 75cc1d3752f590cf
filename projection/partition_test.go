package projection_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/syncbuf"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// Environment of the worker processes TestPartitionedSIGKILL starts.
const (
	partChildEnv  = "PGDCB_PARTITION_CHILD"
	partDSNEnv    = "PGDCB_PARTITION_DSN"
	partSchemaEnv = "PGDCB_PARTITION_SCHEMA"
	partModeEnv   = "PGDCB_PARTITION_MODE"
)

var partQ = query.Tagged([]string{"W"})

func partConfig(parts int, lease time.Duration) *projection.PartitionConfig {
	return &projection.PartitionConfig{Key: "wallet", Partitions: parts, Lease: lease, BatchSize: 50,
		ReaderConfig: projection.ReaderConfig{PollInterval: 50 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond,
			RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond}}
}

// partMode is a read mode of the partitioned projection tests: tail reads
// on the test server, or logical decoding (PartitionConfig.Logical, each
// partition on a replication slot of its own) on the wal_level=logical
// cluster.
type partMode struct {
	name    string
	logical bool
}

var partModes = []partMode{{"tail", false}, {"logical", true}}

// inModes runs test as a subtest per read mode: the same test body, its
// every check, in both.
func inModes(t *testing.T, test func(t *testing.T, m partMode)) {
	for _, m := range partModes {
		t.Run(m.name, func(t *testing.T) { test(t, m) })
	}
}

// modeNamed is the partMode named name (the child processes' environment).
func modeNamed(name string) partMode {
	for _, m := range partModes {
		if m.name == name {
			return m
		}
	}
	panic("no read mode " + name)
}

// store returns a store in a fresh schema on the mode's server, with the
// keyed read model (keyedModel), its pool, and the server's DSN.
func (m partMode) store(t *testing.T) (*eventstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	var (
		s    *eventstore.Store
		pool *pgxpool.Pool
		dsn  string
	)
	if m.logical {
		s, pool = teststore.Logical(t, nil)
		dsn = pgtest.LogicalCluster(t).DSN()
	} else {
		s, pool = newStore(t)
		dsn = pgtest.DSN(t)
	}
	keyedModel(t, pool, ident.Schema(s))
	return s, pool, dsn
}

// config is partConfig in the mode.
func (m partMode) config(parts int, lease time.Duration) *projection.PartitionConfig {
	c := partConfig(parts, lease)
	if m.logical {
		c.Logical = &logical.Config{}
	}
	return c
}

// dropSlots drops, when the test ends (after the workers it starts later
// have stopped), the replication slots of projection name's partitions in
// logical mode, once their WAL senders have let go of them: the logical
// cluster is shared.
func (m partMode) dropSlots(t *testing.T, s *eventstore.Store, pool *pgxpool.Pool, name string, parts int) {
	if !m.logical {
		return
	}
	t.Cleanup(func() {
		for i := range parts {
			slot := projection.PartitionSlot(s.Schema(), name, i)
			await.Until(t, 30*time.Second, func() (bool, string) {
				err := logical.DropSlot(context.Background(), pool, slot)
				return err == nil, fmt.Sprint(err)
			})
		}
	})
}

// keyedModel creates the read model of the partition tests: rm_keys counts
// the events handled per key, and rm_events holds one row per event handled
// (no unique constraint, so a duplicate shows) with the key's count after
// it (n): with exactly once and per-key log order, n equals the event's
// per-key sequence number (seq, 1, 2, … in the order its writer appended).
func keyedModel(t *testing.T, pool *pgxpool.Pool, schema string) {
	_, err := pool.Exec(t.Context(), `CREATE TABLE `+schema+`.rm_keys (key text PRIMARY KEY, n int NOT NULL);
		CREATE TABLE `+schema+`.rm_events (key text NOT NULL, seq int NOT NULL, position bigint NOT NULL, n int NOT NULL, worker text NOT NULL)`)
	require.NoError(t, err)
}

// keyedHandler writes the keyed model's rows for a batch, in one round trip.
func keyedHandler(schema, worker string) projection.Handler {
	return func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		var b pgx.Batch
		for _, ev := range evs {
			var d struct{ Seq int }
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return err
			}
			key, _ := ev.Tags.Get("wallet")
			b.Queue(`WITH k AS (INSERT INTO `+schema+`.rm_keys AS k VALUES ($1, 1)
				ON CONFLICT (key) DO UPDATE SET n = k.n + 1 RETURNING n)
				INSERT INTO `+schema+`.rm_events SELECT $1, $2, $3, n, $4 FROM k`, key, d.Seq, ev.Position, worker)
		}
		return tx.SendBatch(ctx, &b).Close()
	}
}

// keyedEvent is the seq-th event of key ("" appends it without the key).
func keyedEvent(key string, seq int) pgdcb.Event {
	if key == "" {
		return pgdcb.MustEvent("W", map[string]int{"seq": seq}, "other=x")
	}
	return pgdcb.MustEvent("W", map[string]int{"seq": seq}, "wallet="+key)
}

// requireKeyedExactlyOnce: every W event has exactly one row, and each
// key's events were handled in their order (n = seq).
func requireKeyedExactlyOnce(t *testing.T, pool *pgxpool.Pool, schema string, want int) {
	t.Helper()
	ctx := t.Context()
	var events, rows, distinct, missing, disorder int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.events WHERE type = 'W'`).Scan(&events))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT position) FROM `+schema+`.rm_events`).Scan(&rows, &distinct))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.events e WHERE type = 'W'
		AND NOT EXISTS (SELECT 1 FROM `+schema+`.rm_events r WHERE r.position = e.position)`).Scan(&missing))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.rm_events WHERE n <> seq`).Scan(&disorder))
	require.Equal(t, want, events, "events in the log")
	require.Zero(t, missing, "events missing from the read model")
	require.Equal(t, distinct, rows, "events handled twice")
	require.Equal(t, want, rows, "rows in the read model")
	require.Zero(t, disorder, "events of a key handled out of order")
}

// owners returns how many partitions each worker holds under a live lease.
func owners(t *testing.T, pool *pgxpool.Pool, schema, name string) map[string]int {
	rows, err := pool.Query(t.Context(), `SELECT owner, count(*) FROM `+schema+`.projection_partitions
		WHERE name = $1 AND owner IS NOT NULL AND lease_until > now() GROUP BY owner`, name)
	require.NoError(t, err)
	m := map[string]int{}
	for rows.Next() {
		var (
			o string
			n int
		)
		require.NoError(t, rows.Scan(&o, &n))
		m[o] = n
	}
	require.NoError(t, rows.Err())
	return m
}

// checkpointsCover reports whether every partition's checkpoint is at or
// after the log's last event.
func checkpointsCover(t *testing.T, pool *pgxpool.Pool, schema, name string) bool {
	var behind int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM `+schema+`.projection_partitions p
		WHERE name = $1 AND EXISTS (SELECT 1 FROM `+schema+`.events e
		WHERE (e.transaction_id, e.position) > (p.transaction_id, p.position))`, name).Scan(&behind))
	return behind == 0
}

func TestPartitionedConfig(t *testing.T) {
	s, _ := newStore(t)
	h := func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error { return nil }
	for _, c := range []*projection.PartitionConfig{nil, {Key: "Wallet"}, {Key: "wallet", Partitions: -1},
		{Key: "wallet", Partitions: 1025}, {Key: "wallet", Lease: -time.Second},
		{Key: "wallet", Logical: &logical.Config{Slot: "mine"}}, {Key: "wallet", Logical: &logical.Config{StatusInterval: -1}}} {
		_, err := projection.NewPartitioned(s, "p", partQ, h, c)
		var iae *pgdcb.InvalidArgumentError
		require.ErrorAs(t, err, &iae, "%+v", c)
	}
	_, err := projection.NewPartitioned(s, "p", partQ, h, &projection.PartitionConfig{Key: "wallet"})
	require.NoError(t, err)
}

// TestPartitionedLogicalNeedsASlotPerPartition: in logical mode a worker
// refuses to start (logged, retried) when the server's
// max_replication_slots (40 on the logical cluster) is below the number of
// partitions, and holds nothing.
func TestPartitionedLogicalNeedsASlotPerPartition(t *testing.T) {
	m := modeNamed("logical")
	s, pool, _ := m.store(t)
	cfg := m.config(41, time.Second)
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	p, err := projection.NewPartitioned(s, "many", partQ, keyedHandler(ident.Schema(s), "w"), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	await.True(t, 10*time.Second, "the worker is refused", func() bool {
		return strings.Contains(logs.String(), "41 partitions, but the server has max_replication_slots = 40")
	})
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Empty(t, owners(t, pool, ident.Schema(s), "many"))
}

// TestPartitionedRebalance: one worker holds every partition; two more
// join and each gets a fair share (2 of 6) within a bounded time; one
// leaves and the two left take its share; a worker with another partition
// count is refused. Events of 20 keys and some without the key, appended
// throughout, are handled exactly once and in per-key order.
func TestPartitionedRebalance(t *testing.T) { inModes(t, testPartitionedRebalance) }

func testPartitionedRebalance(t *testing.T, m partMode) {
	s, pool, _ := m.store(t)
	schema := ident.Schema(s)
	const name, lease = "wallets", 400 * time.Millisecond
	m.dropSlots(t, s, pool, name, 6)
	seq := map[string]int{}
	total := 0
	appendSome := func() {
		for k := range 21 {
			key := ""
			if k > 0 {
				key = fmt.Sprint("w", k)
			}
			seq[key]++
			_, err := s.Append(t.Context(), []pgdcb.Event{keyedEvent(key, seq[key])})
			require.NoError(t, err)
			total++
		}
	}
	type worker struct {
		cancel context.CancelFunc
		done   chan error
	}
	start := func(id string) worker {
		cfg := m.config(6, lease)
		cfg.Identity = id
		p, err := projection.NewPartitioned(s, name, partQ, keyedHandler(schema, id), cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		w := worker{cancel: cancel, done: make(chan error, 1)}
		go func() { w.done <- p.Run(ctx) }()
		return w
	}
	stop := func(w worker) {
		w.cancel()
		require.ErrorIs(t, <-w.done, context.Canceled)
	}
	shares := func(want ...int) func() (bool, string) {
		return func() (bool, string) {
			m := owners(t, pool, schema, name)
			var got []int
			for _, n := range m {
				got = append(got, n)
			}
			return len(got) == len(want) && fmt.Sprint(sorted(got)) == fmt.Sprint(want), fmt.Sprint(m)
		}
	}
	bound := 4 * lease // a round (Lease/4) to release, one to claim, and slack for a loaded machine

	appendSome()
	w1 := start("w1")
	await.Until(t, 10*time.Second, shares(6))
	appendSome()
	w2, w3 := start("w2"), start("w3")
	began := time.Now()
	await.Until(t, 10*time.Second, shares(2, 2, 2))
	t.Logf("two workers joined: fair shares after %s", time.Since(began))
	require.Less(t, time.Since(began), 6*bound, "rebalance time")
	appendSome()
	stop(w2)
	await.Until(t, 10*time.Second, shares(3, 3))

	other := m.config(4, lease)
	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncbuf.Buffer{}
	other.Logger = slog.New(slog.NewTextHandler(logs, nil))
	p, err := projection.NewPartitioned(s, name, partQ, keyedHandler(schema, "x"), other)
	require.NoError(t, err)
	refused := make(chan error, 1)
	go func() { refused <- p.Run(ctx) }()
	await.True(t, 10*time.Second, "a worker with another partition count is refused", func() bool {
		return strings.Contains(logs.String(), "into 6 partitions")
	})
	cancel()
	require.ErrorIs(t, <-refused, context.Canceled)
	require.Len(t, owners(t, pool, schema, name), 2, "the refused worker holds nothing")

	appendSome()
	await.True(t, 10*time.Second, "every event handled", func() bool {
		return rmEventsCount(t, pool, schema) >= total && checkpointsCover(t, pool, schema, name)
	})
	stop(w1)
	stop(w3)
	requireKeyedExactlyOnce(t, pool, schema, total)
	require.Empty(t, owners(t, pool, schema, name), "stopped workers release their partitions")
}

func sorted(xs []int) []int {
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if xs[j] < xs[i] {
				xs[i], xs[j] = xs[j], xs[i]
			}
		}
	}
	return xs
}

func rmEventsCount(t *testing.T, pool *pgxpool.Pool, schema string) int {
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM `+schema+`.rm_events`).Scan(&n))
	return n
}

// TestPartitionedFencing: worker A is inside a batch (rows written, not
// committed) when its lease runs out; worker B claims the partition and
// starts the same batch (logical mode: once A's batch has ended, see
// below). A's commit is then refused (its claim's epoch is gone), although
// the checkpoint has not moved yet; B's commits. Every event is in the
// read model once, written by B.
func TestPartitionedFencing(t *testing.T) { inModes(t, testPartitionedFencing) }

func testPartitionedFencing(t *testing.T, m partMode) {
	s, pool, _ := m.store(t)
	schema := ident.Schema(s)
	const name, lease = "fenced", 300 * time.Millisecond
	m.dropSlots(t, s, pool, name, 1)
	for i := range 10 {
		_, err := s.Append(t.Context(), []pgdcb.Event{keyedEvent(fmt.Sprint("w", i), 1)})
		require.NoError(t, err)
	}
	// A blocks after writing its rows, B before (its writes would wait for
	// A's uncommitted rm_keys rows).
	blocking := func(id string, before bool, in chan<- struct{}, release <-chan struct{}) projection.Handler {
		h := keyedHandler(schema, id)
		var once sync.Once
		block := func() {
			once.Do(func() {
				select { // not once the test released it (ending)
				case in <- struct{}{}:
				case <-release:
				}
				<-release
			})
		}
		return func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
			if before {
				block()
			}
			if err := h(ctx, tx, evs); err != nil {
				return err
			}
			block()
			return nil
		}
	}
	run := func(id string, h projection.Handler, logs *syncbuf.Buffer) (context.CancelFunc, chan error) {
		cfg := m.config(1, lease)
		// B ranks first among the live workers (by name), so that its
		// fair share keeps the partition once A is live again.
		cfg.Identity = map[string]string{"A": "2-A", "B": "1-B"}[id]
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		p, err := projection.NewPartitioned(s, name, partQ, h, cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		return cancel, done
	}
	aIn, aGo, bIn, bGo := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	releaseA, releaseB := sync.OnceFunc(func() { close(aGo) }), sync.OnceFunc(func() { close(bGo) })
	aLogs, bLogs := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	cancelA, doneA := run("A", blocking("A", false, aIn, aGo), aLogs)
	cancelB, doneB := func() {}, make(chan error, 1)
	doneB <- context.Canceled
	t.Cleanup(func() { // also when the test fails half-way
		releaseA()
		releaseB()
		cancelA()
		cancelB()
		require.ErrorIs(t, <-doneA, context.Canceled)
		require.ErrorIs(t, <-doneB, context.Canceled)
	})
	<-aIn // A is in its batch, which cannot renew its lease (logical mode: not for more than Lease/2)
	<-doneB
	cancelB, doneB = run("B", blocking("B", true, bIn, bGo), bLogs)
	if m.logical {
		// B claims the partition after A's lease ran out, but its stream
		// begins only after A's batch: the partition's slot, created anew
		// (A committed nothing), waits for A's transaction to end.
		await.True(t, 5*time.Second, "B claims the partition", func() bool {
			for o := range owners(t, pool, schema, name) {
				if strings.HasPrefix(o, "1-B#") {
					return true
				}
			}
			return false
		})
	} else {
		<-bIn // B claimed the partition after A's lease ran out, and is in the same batch
	}
	require.Equal(t, 0, rmEventsCount(t, pool, schema), "nothing committed yet")
	releaseA()
	await.True(t, 5*time.Second, "A's commit is refused", func() bool {
		return strings.Contains(aLogs.String(), "partition lost (fenced)")
	})
	if m.logical {
		<-bIn // B's batch, after A's
	}
	releaseB()
	await.True(t, 5*time.Second, "B commits", func() bool {
		return rmEventsCount(t, pool, schema) >= 10 && checkpointsCover(t, pool, schema, name)
	})
	requireKeyedExactlyOnce(t, pool, schema, 10)
	var byA int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM `+schema+`.rm_events WHERE worker = 'A'`).Scan(&byA))
	require.Zero(t, byA, "rows of the fenced worker committed")
}

// TestHelperPartitionWorker is the child process of TestPartitionedSIGKILL:
// a worker that prints BATCH each time a batch's rows are written but not
// committed, and lingers 20 ms there so that the parent can kill it.
func TestHelperPartitionWorker(t *testing.T) {
	id := os.Getenv(partChildEnv)
	if id == "" {
		t.Skip("child process of TestPartitionedSIGKILL")
	}
	pool, err := pgxpool.New(context.Background(), os.Getenv(partDSNEnv))
	require.NoError(t, err)
	schema := os.Getenv(partSchemaEnv)
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	h := keyedHandler(pgx.Identifier{schema}.Sanitize(), id)
	cfg := modeNamed(os.Getenv(partModeEnv)).config(8, 500*time.Millisecond)
	cfg.Identity = id
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := projection.NewPartitioned(store, "wallets", partQ, func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		if err := h(ctx, tx, evs); err != nil {
			return err
		}
		fmt.Println("BATCH")
		time.Sleep(20 * time.Millisecond)
		return nil
	}, cfg)
	require.NoError(t, err)
	_ = p.Run(context.Background()) // until killed
}

// TestPartitionedSIGKILL: 8 writers append events of 64 keys (and events
// without the key) while worker processes of a projection of 8 partitions
// are SIGKILLed in the middle of a batch and others are added. Afterwards
// the read model holds every event exactly once, each key's events handled
// in their order.
func TestPartitionedSIGKILL(t *testing.T) { inModes(t, testPartitionedSIGKILL) }

func testPartitionedSIGKILL(t *testing.T, m partMode) {
	s, pool, dsn := m.store(t)
	schema := ident.Schema(s)
	m.dropSlots(t, s, pool, "wallets", 8)

	type child struct {
		cmd     *exec.Cmd
		batches chan struct{}
	}
	var children []*child
	spawn := func(id string) *child {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPartitionWorker$", "-test.count=1")
		cmd.Env = append(os.Environ(), partChildEnv+"="+id, partDSNEnv+"="+dsn, partSchemaEnv+"="+s.Schema(), partModeEnv+"="+m.name)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		c := &child{cmd: cmd, batches: make(chan struct{}, 1000)}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "BATCH" {
					c.batches <- struct{}{}
				} else if !strings.HasPrefix(sc.Text(), "=== RUN") {
					fmt.Fprintln(os.Stderr, id+":", sc.Text())
				}
			}
		}()
		children = append(children, c)
		return c
	}
	t.Cleanup(func() {
		for _, c := range children {
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			_ = c.cmd.Wait()
		}
	})
	kill := func(c *child, afterBatches int) {
		for range afterBatches {
			select {
			case <-c.batches:
			case <-time.After(10 * time.Second):
				t.Fatal("a worker process ran no batch")
			}
		}
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
		_ = c.cmd.Wait()
	}

	// The writers append until the kills and spawns are done.
	const writers = 8
	var (
		wg     sync.WaitGroup
		stop   = make(chan struct{})
		counts [writers]int
		errs   = make(chan error, writers)
	)
	for w := range writers {
		wg.Go(func() {
			seq := map[string]int{}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i%8)
				if w == 0 && i%4 == 3 {
					key = "" // no key: the partition of the empty value
				}
				seq[key]++
				if _, err := s.Append(context.Background(), []pgdcb.Event{keyedEvent(key, seq[key])}); err != nil {
					errs <- err
					return
				}
				counts[w]++
			}
		})
	}
	c1, c2 := spawn("c1"), spawn("c2")
	kill(c1, 3)
	c3 := spawn("c3")
	kill(c2, 3)
	spawn("c4")
	spawn("c5")
	kill(c3, 3)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	spawn("c6")
	total := 0
	for _, n := range counts {
		total += n
	}
	await.Until(t, 30*time.Second, func() (bool, string) {
		n := rmEventsCount(t, pool, schema)
		return n >= total && checkpointsCover(t, pool, schema, "wallets"), fmt.Sprintf("%d of %d events handled", n, total)
	})
	requireKeyedExactlyOnce(t, pool, schema, total)
	var workers int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(DISTINCT worker) FROM `+schema+`.rm_events`).Scan(&workers))
	t.Logf("%d events handled by %d worker processes (3 SIGKILLed)", total, workers)
}

// TestPartitionedHandlerErrorRetried: a handler that fails its first three
// calls has its batches rolled back and retried (with backoff) until they
// commit; every event is handled once, in per-key order.
func TestPartitionedHandlerErrorRetried(t *testing.T) {
	s, pool := newStore(t)
	schema := ident.Schema(s)
	keyedModel(t, pool, schema)
	for i := range 30 {
		_, err := s.Append(t.Context(), []pgdcb.Event{keyedEvent(fmt.Sprint("w", i%3), i/3+1)})
		require.NoError(t, err)
	}
	h := keyedHandler(schema, "w")
	var calls atomic.Int64
	p, err := projection.NewPartitioned(s, "flaky", partQ, func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		if err := h(ctx, tx, evs); err != nil {
			return err
		}
		if calls.Add(1) <= 3 {
			return errors.New("flaky read model")
		}
		return nil
	}, partConfig(2, time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	await.True(t, 10*time.Second, "every event handled", func() bool {
		return rmEventsCount(t, pool, schema) >= 30 && checkpointsCover(t, pool, schema, "flaky")
	})
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Greater(t, calls.Load(), int64(3))
	requireKeyedExactlyOnce(t, pool, schema, 30)
}

// TestPartitionedBehindAndCaughtUp: one worker holds a partition far behind
// (its handler failed while hundreds of its events were appended) and one
// caught up; the worker reads the log once per round from the lower
// checkpoint (logical mode: each partition streams on its own slot), and
// both end exact: no event of the caught-up partition
// handled again, none of the one behind skipped, per-key order kept.
func TestPartitionedBehindAndCaughtUp(t *testing.T) { inModes(t, testPartitionedBehindAndCaughtUp) }

func testPartitionedBehindAndCaughtUp(t *testing.T, m partMode) {
	s, pool, _ := m.store(t)
	schema := ident.Schema(s)
	m.dropSlots(t, s, pool, "behind", 2)
	partOf := func(key string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(key))
		return h.Sum64() % 2
	}
	behind, ahead := "b0", "a0"
	for i := 0; partOf(ahead) == partOf(behind); i++ {
		ahead = fmt.Sprint("a", i)
	}
	var hold atomic.Bool
	hold.Store(true)
	h := keyedHandler(schema, "w")
	p, err := projection.NewPartitioned(s, "behind", partQ, func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		if k, _ := evs[0].Tags.Get("wallet"); k == behind && hold.Load() {
			return errors.New("read model of the partition behind unavailable")
		}
		return h(ctx, tx, evs)
	}, m.config(2, time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	seq := map[string]int{}
	appendKeyed := func(key string, n int) {
		evs := make([]pgdcb.Event, n)
		for i := range evs {
			seq[key]++
			evs[i] = keyedEvent(key, seq[key])
		}
		_, err := s.Append(t.Context(), evs)
		require.NoError(t, err)
	}
	handled := func(key string) int {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM `+schema+`.rm_events WHERE key = $1`, key).Scan(&n))
		return n
	}
	for range 12 { // 600 events behind: 6 pages of 100
		appendKeyed(behind, 50)
		appendKeyed(ahead, 10)
	}
	await.True(t, 10*time.Second, "the caught-up partition handles its events", func() bool {
		return handled(ahead) == seq[ahead]
	})
	require.Zero(t, handled(behind), "the partition behind handled nothing")
	hold.Store(false)
	for range 5 { // appended while the partition behind catches up
		appendKeyed(behind, 10)
		appendKeyed(ahead, 10)
	}
	await.True(t, 20*time.Second, "both partitions catch up", func() bool {
		return rmEventsCount(t, pool, schema) >= seq[behind]+seq[ahead] && checkpointsCover(t, pool, schema, "behind")
	})
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	requireKeyedExactlyOnce(t, pool, schema, seq[behind]+seq[ahead])
}

// TestPartitionedSlotLost (logical mode): the slots of a stopped worker's
// partitions are dropped while their checkpoints hold events consumed
// beyond their cursors. The next worker resynchronises each partition from
// the log, exactly once: every event once, per-key order kept, the events
// consumed beyond the cursors not handled again.
func TestPartitionedSlotLost(t *testing.T) {
	const parts = 2
	logs := testBeyondTheCursor(t, parts, func(t *testing.T, s *eventstore.Store, pool *pgxpool.Pool, name string) {
		for i := range parts {
			require.NoError(t, logical.DropSlot(t.Context(), pool, projection.PartitionSlot(s.Schema(), name, i)))
		}
	}, modeNamed("logical"))
	require.Equal(t, parts, strings.Count(logs.String(), "resynchronising from the log"), "each partition resynchronised")
}

// TestPartitionedSwitchesReadModes: a partitioned projection switches from
// logical decoding to tail reads while its checkpoints hold events consumed
// beyond their cursors, and back: each event once both ways, per-key order
// kept; the tail reads drop the abandoned slots.
func TestPartitionedSwitchesReadModes(t *testing.T) {
	const parts = 2
	testBeyondTheCursor(t, parts, func(*testing.T, *eventstore.Store, *pgxpool.Pool, string) {}, modeNamed("tail"), modeNamed("logical"))
}

// testBeyondTheCursor runs a logical worker of a projection of parts
// partitions until every partition's checkpoint holds events consumed
// beyond its cursor (a transaction of the database was open: commit order
// passed it, log order could not), stops it and lets the transaction end,
// calls between, then runs a worker in each mode of then in turn, events
// appended before and during each: each ends with every event handled
// once, per-key order kept. It returns the workers' logs. A tail-mode
// worker leaves no slot of the projection.
func testBeyondTheCursor(t *testing.T, parts int, between func(*testing.T, *eventstore.Store, *pgxpool.Pool, string), then ...partMode) *syncbuf.Buffer {
	first := modeNamed("logical")
	s, pool, _ := first.store(t)
	schema := ident.Schema(s)
	const name = "beyond"
	first.dropSlots(t, s, pool, name, parts)
	ctx := t.Context()
	seq := map[string]int{}
	appendKeys := func(keys ...string) pgdcb.AppendResult {
		var evs []pgdcb.Event
		for _, k := range keys {
			seq[k]++
			evs = append(evs, keyedEvent(k, seq[k]))
		}
		res, err := s.Append(ctx, evs)
		require.NoError(t, err)
		return res
	}
	logs := &syncbuf.Buffer{}
	run := func(m partMode) func() {
		cfg := m.config(parts, time.Second)
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		p, err := projection.NewPartitioned(s, name, partQ, keyedHandler(schema, m.name), cfg)
		require.NoError(t, err)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		return func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		}
	}
	total := func() int {
		n := 0
		for _, c := range seq {
			n += c
		}
		return n
	}
	keys := []string{"w1", "w2", "w3", "w4", "w5", "w6"}
	appendKeys(keys...)
	stop := run(first)
	await.True(t, 30*time.Second, "the first events handled", func() bool { return rmEventsCount(t, pool, schema) == total() })

	holder, err := pool.Begin(ctx) // holds every partition's cursor below it
	require.NoError(t, err)
	defer holder.Rollback(context.Background())
	_, err = holder.Exec(ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)
	ahead := appendKeys(keys...)
	await.True(t, 30*time.Second, "events beyond the cursors handled", func() bool { return rmEventsCount(t, pool, schema) == total() })
	// Stored: checkpoints naming the events consumed beyond the cursors.
	await.Until(t, 30*time.Second, func() (bool, string) {
		rows, err := pool.Query(ctx, `SELECT transaction_id, position, coalesce(logical_checkpoint, '')
			FROM `+schema+`.projection_partitions WHERE name = $1`, name)
		require.NoError(t, err)
		var (
			c    cursor.Cursor
			text string
			ok   = 0
		)
		_, err = pgx.ForEachRow(rows, []any{&c.TransactionID, &c.Position, &text}, func() error {
			cp, err := logical.ParseCheckpoint(text)
			if err == nil && cp.Done != nil && cp.Done.Has(ahead.TransactionID, ahead.Positions[0]) && c.TransactionID < ahead.TransactionID {
				ok++
			}
			return err
		})
		require.NoError(t, err)
		return ok == parts, fmt.Sprintf("%d of %d partitions", ok, parts)
	})
	stop()
	require.NoError(t, holder.Rollback(ctx))
	between(t, s, pool, name)

	for _, m := range then {
		appendKeys(keys...)
		stop = run(m)
		appendKeys(keys...)
		await.True(t, 30*time.Second, "every event handled in mode "+m.name, func() bool {
			return rmEventsCount(t, pool, schema) >= total() && checkpointsCover(t, pool, schema, name)
		})
		stop()
		requireKeyedExactlyOnce(t, pool, schema, total())
		if !m.logical {
			var (
				names []string
				slots int
			)
			for i := range parts {
				names = append(names, projection.PartitionSlot(s.Schema(), name, i))
			}
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY($1)`, names).Scan(&slots))
			require.Zero(t, slots, "slots left by tail reads")
		}
	}
	return logs
}

// TestPartitionedReset: Reset of a partitioned projection (three rounds),
// while two workers run and a writer appends, clears the read model (clear) and
// moves every partition back to the start in one transaction: the read
// model is rebuilt from the whole log, every event exactly once and each
// key in order, and no checkpoint of the name appears beside its
// partitions.
func TestPartitionedReset(t *testing.T) { inModes(t, testPartitionedReset) }

func testPartitionedReset(t *testing.T, m partMode) {
	s, pool, _ := m.store(t)
	schema := ident.Schema(s)
	const name, parts = "reset", 4
	m.dropSlots(t, s, pool, name, parts)
	seq := map[string]int{}
	total := 0
	appendSome := func(n int) {
		for i := range n {
			key := fmt.Sprint("w", i%6)
			seq[key]++
			_, err := s.Append(t.Context(), []pgdcb.Event{keyedEvent(key, seq[key])})
			require.NoError(t, err)
			total++
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		cfg := m.config(parts, time.Second)
		cfg.Identity = id
		p, err := projection.NewPartitioned(s, name, partQ, keyedHandler(schema, id), cfg)
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	caughtUp := func() bool { return rmEventsCount(t, pool, schema) == total && checkpointsCover(t, pool, schema, name) }
	appendSome(60)
	await.True(t, 20*time.Second, "the workers catch up", caughtUp)

	// Rounds of a reset while a writer appends and the workers run
	// batches, some of them in flight at the reset.
	for range 3 {
		writing := make(chan struct{})
		go func() { defer close(writing); appendSome(30) }()
		require.NoError(t, projection.Reset(t.Context(), s, name, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `DELETE FROM `+schema+`.rm_keys; DELETE FROM `+schema+`.rm_events`)
			return err
		}))
		<-writing
	}
	await.True(t, 20*time.Second, "the read model is rebuilt", caughtUp)
	requireKeyedExactlyOnce(t, pool, schema, total)
	_, err := projection.GetStatus(t.Context(), s, name)
	require.ErrorIs(t, err, projection.ErrNotFound, "a checkpoint beside the partitions")
}
