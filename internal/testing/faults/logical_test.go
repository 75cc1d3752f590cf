package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// The logical decoding mode's scenarios: a projection fed by a replication
// slot (projection.Config.Logical), in a read model that records the order
// it handled events in. Transactions of 37 events in batches of 100 split
// transactions across batches, so resuming inside one is exercised.
const logicalTxSize = 37

func logicalConfig() *projection.Config {
	c := projConfig()
	c.Logical = &logical.Config{}
	c.MaxAttempts = projection.RetryForever
	return c
}

func createOrderedRM(t *testing.T, e *env) {
	t.Helper()
	_, err := e.admin.Exec(t.Context(), `CREATE TABLE `+e.quoted+`.rm (seq bigserial PRIMARY KEY, position bigint NOT NULL, tx xid8 NOT NULL)`)
	require.NoError(t, err)
}

func insertOrderedRows(quoted string) projection.Handler {
	return func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		pos := make([]int64, len(evs))
		txs := make([]string, len(evs))
		for i, ev := range evs {
			pos[i], txs[i] = ev.Position, fmt.Sprint(ev.TransactionID)
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+quoted+`.rm (position, tx) SELECT * FROM unnest($1::bigint[], $2::text[]::xid8[])`, pos, txs)
		return err
	}
}

// logicalVerdict compares the read model with the P events stored.
type logicalVerdict struct {
	rows, distinct, missing, extra int
	// groups are the transactions in the order the read model got them;
	// split is how many transactions were not contiguous or not in
	// position order.
	groups []uint64
	split  int
}

func verifyLogical(t *testing.T, e *env) logicalVerdict {
	t.Helper()
	var v logicalVerdict
	ctx := t.Context()
	require.NoError(t, e.admin.QueryRow(ctx, `SELECT count(*), count(DISTINCT position) FROM `+e.quoted+`.rm`).Scan(&v.rows, &v.distinct))
	require.NoError(t, e.admin.QueryRow(ctx, `SELECT count(*) FROM `+e.quoted+`.events e WHERE type = 'P'
		AND NOT EXISTS (SELECT 1 FROM `+e.quoted+`.rm r WHERE r.position = e.position)`).Scan(&v.missing))
	require.NoError(t, e.admin.QueryRow(ctx, `SELECT count(*) FROM `+e.quoted+`.rm r
		WHERE NOT EXISTS (SELECT 1 FROM `+e.quoted+`.events e WHERE e.position = r.position AND e.transaction_id = r.tx AND e.type = 'P')`).Scan(&v.extra))
	rows, err := e.admin.Query(ctx, `SELECT position, tx::text::bigint FROM `+e.quoted+`.rm ORDER BY seq`)
	require.NoError(t, err)
	seen := map[uint64]bool{}
	var lastPos int64
	for rows.Next() {
		var (
			pos int64
			tx  uint64
		)
		require.NoError(t, rows.Scan(&pos, &tx))
		if len(v.groups) == 0 || v.groups[len(v.groups)-1] != tx {
			if seen[tx] {
				v.split++
			}
			seen[tx] = true
			v.groups = append(v.groups, tx)
		} else if pos <= lastPos {
			v.split++
		}
		lastPos = pos
	}
	require.NoError(t, rows.Err())
	return v
}

func runLogicalProjection(t *testing.T, store *eventstore.Store, quoted string) (stop func()) {
	t.Helper()
	return runOrderedProjection(t, store, quoted, logicalConfig())
}

// runOrderedProjection runs projection "rm" of the ordered read model with
// cfg until the test ends (or stop is called).
func runOrderedProjection(t *testing.T, store *eventstore.Store, quoted string, cfg *projection.Config) (stop func()) {
	t.Helper()
	r, err := projection.New(store, "rm", projQ, insertOrderedRows(quoted), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		})
	}
	t.Cleanup(stop)
	return stop
}

func dropLogicalSlot(t *testing.T, e *env) {
	t.Cleanup(func() {
		_ = serverExec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
			WHERE NOT active AND slot_name = '`+logical.SlotName(e.schema, "rm")+`'`)
	})
}

// Scenario L1. A logical projection runs while one writer appends
// transactions of 37 events and the server crashes twice (pg_ctl stop -m
// immediate). A transaction that appended first and committed later must be
// delivered after the transactions that committed before it. At the end the
// read model holds every stored event exactly once, each transaction whole
// and contiguous, in commit order.
func TestLogicalProjectionServerCrash(t *testing.T) {
	s := cluster(t)
	began := time.Now()
	e := newEnv(t)
	dropLogicalSlot(t, e)
	pool := newPool(t, "faults_logical", 6, nil)
	store := e.store(t, pool, nil)
	createOrderedRM(t, e)
	rmCount := func() int {
		var n int
		if err := e.admin.QueryRow(context.Background(), `SELECT count(*) FROM `+e.quoted+`.rm`).Scan(&n); err != nil {
			return -1 // the server is down
		}
		return n
	}
	runLogicalProjection(t, store, e.quoted)

	// The writer: sequential appends, so commit order is append order.
	var (
		mu     sync.Mutex
		acked  []uint64 // transaction ids, in commit order
		failed int
	)
	wctx, wstop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; wctx.Err() == nil; i++ {
			res, err := store.Append(wctx, batch("P", fmt.Sprint("w-", i), logicalTxSize))
			mu.Lock()
			if err == nil {
				acked = append(acked, res.TransactionID)
			} else {
				failed++
			}
			mu.Unlock()
			if err != nil { // the server is down: back off, or stop when told
				select {
				case <-wctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	})
	defer func() { wstop(); wg.Wait() }()
	ackedN := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	require.Eventually(t, func() bool { return rmCount() > 0 }, 60*time.Second, 10*time.Millisecond, "the projection delivers")
	// The early transaction: appends now, commits after later ones.
	early, err := pool.Begin(t.Context())
	require.NoError(t, err)
	er, err := store.AppendTx(t.Context(), early, batch("P", "early", 3))
	require.NoError(t, err)
	n0 := ackedN()
	require.Eventually(t, func() bool { return ackedN() >= n0+3 }, 60*time.Second, 5*time.Millisecond)
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	require.NoError(t, early.Commit(t.Context()))

	var recovery time.Duration
	for round := range 2 {
		n := rmCount()
		require.Eventually(t, func() bool { return rmCount() > n }, 60*time.Second, 10*time.Millisecond, "delivery before crash %d", round)
		require.NoError(t, s.Crash(t.Context()), "crash %d", round)
		restart := time.Now()
		require.NoError(t, s.Start(t.Context()), "start %d", round)
		n = max(rmCount(), 0)
		require.Eventually(t, func() bool { return rmCount() > n }, 60*time.Second, 10*time.Millisecond, "delivery after crash %d", round)
		recovery = max(recovery, time.Since(restart))
	}
	wstop()
	wg.Wait()

	var stored int
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM `+e.quoted+`.events WHERE type = 'P'`).Scan(&stored))
	require.Eventually(t, func() bool { return rmCount() >= stored }, 60*time.Second, 10*time.Millisecond, "the projection catches up")
	v := verifyLogical(t, e)

	// Commit order: the writer's transactions in the order acknowledged
	// (ids ascending: one writer), the early one after the writer's
	// transactions acknowledged before it committed.
	idx := map[uint64]int{}
	for i, tx := range v.groups {
		idx[tx] = i
	}
	mu.Lock()
	ackedCopy := append([]uint64(nil), acked...)
	failedN := failed
	mu.Unlock()
	disorder := 0
	for i := 1; i < len(v.groups); i++ {
		a, b := v.groups[i-1], v.groups[i]
		if a != er.TransactionID && b != er.TransactionID && a > b {
			disorder++
		}
	}
	earlyPos, ok := idx[er.TransactionID]
	require.True(t, ok, "the early transaction was delivered")
	for _, tx := range ackedCopy[:before] {
		if idx[tx] > earlyPos {
			disorder++
		}
	}
	require.Less(t, er.TransactionID, ackedCopy[before-1], "the early transaction has a lower id than those that committed before it")

	f := figures{Scenario: "L1 logical projection, 2 crashes", Attempts: len(ackedCopy) + failedN, Acked: len(ackedCopy),
		Definite: failedN, Lost: v.missing, Duplicated: v.rows - v.distinct, Partial: v.split,
		Recovery: recovery, Elapsed: time.Since(began),
		Note: fmt.Sprintf("%d events in %d transactions delivered in commit order (out of order: %d); the early transaction delivered after %d later-id ones", v.rows, len(v.groups), disorder, before)}
	record(t, f)
	require.Zero(t, v.missing, "events missing from the read model")
	require.Zero(t, v.rows-v.distinct, "events projected twice")
	require.Zero(t, v.extra, "rows of no event")
	require.Zero(t, v.split, "a transaction's events not contiguous or not in position order")
	require.Zero(t, disorder, "transactions not in commit order")
}

// TestHelperLogicalProjection is the child process of
// TestLogicalProjectionSIGKILL: it runs the logical projection and prints
// BATCH each time a batch's rows are written but not committed, then lingers
// 30 ms there so that the parent can kill it.
func TestHelperLogicalProjection(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode != "logical" && mode != "logical-catchup" && mode != "tail" {
		t.Skip("child process of TestLogicalProjectionSIGKILL and the mode switch scenarios")
	}
	cfg := logicalConfig()
	switch mode {
	case "logical-catchup":
		cfg.Logical = catchUpConfig()
	case "tail": // the same projection with tail reads (L4)
		cfg.Logical = nil
	}
	pool, err := pgxpool.New(context.Background(), os.Getenv(dsnEnv))
	require.NoError(t, err)
	schema := os.Getenv(schemaEnv)
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	ins := insertOrderedRows(pgx.Identifier{schema}.Sanitize())
	r, err := projection.New(store, "rm", projQ, func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		if err := ins(ctx, tx, evs); err != nil {
			return err
		}
		fmt.Println("BATCH")
		time.Sleep(30 * time.Millisecond)
		return nil
	}, cfg)
	require.NoError(t, err)
	_ = r.Run(context.Background()) // until killed
}

// Scenario L2. A logical projection runs in a child process, which is
// SIGKILLed inside a batch (rows written, not committed) or a little later,
// in three rounds with transactions appended between them; then the
// projection runs here to the end. Every event exactly once, transactions
// whole and in commit order.
func TestLogicalProjectionSIGKILL(t *testing.T) { logicalSIGKILL(t, false) }

// catchUpConfig: every restart with a backlog catches up through the SQL
// interface, in calls of 100 changes (pgoutput messages).
func catchUpConfig() *logical.Config { return &logical.Config{CatchUpBytes: 1, CatchUpChunk: 100} }

// Scenario L3. L2, with children that read the backlog of each round
// through the SQL interface (logical.Config.CatchUpBytes): each is
// SIGKILLed while it catches up (a temporary copy of its slot exists when
// it dies), so that a restart resumes from a checkpoint stored during a
// catch-up. Every event exactly once, transactions whole, in commit order.
func TestLogicalProjectionSIGKILLDuringCatchUp(t *testing.T) { logicalSIGKILL(t, true) }

func logicalSIGKILL(t *testing.T, catchUp bool) {
	s := cluster(t)
	began := time.Now()
	e := newEnv(t)
	dropLogicalSlot(t, e)
	store := e.store(t, newPool(t, "faults_logical", 4, nil), nil)
	createOrderedRM(t, e)
	appendP := func(txs int) {
		for i := range txs {
			_, err := store.Append(t.Context(), batch("P", fmt.Sprint("p-", time.Now().UnixNano(), i), logicalTxSize))
			require.NoError(t, err)
		}
	}
	rmCount := func() int {
		var n int
		require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM `+e.quoted+`.rm`).Scan(&n))
		return n
	}
	slot := logical.SlotName(e.schema, "rm")
	copies := func() int { // temporary copies of the slot: catch-ups in progress
		var n int
		require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_replication_slots
			WHERE temporary AND starts_with(slot_name::text, $1 || '_c')`, slot).Scan(&n))
		return n
	}
	mode := "logical"
	if catchUp {
		mode = "logical-catchup"
	}
	total := 0
	if catchUp {
		// The slot and a checkpoint past the initial snapshot read, so
		// that every child resumes from a checkpoint (a catch-up).
		stop := runLogicalProjection(t, store, e.quoted)
		appendP(1)
		total += logicalTxSize
		require.Eventually(t, func() bool { return rmCount() == total }, 60*time.Second, 10*time.Millisecond)
		stop()
	}
	var counts []int
	for round := range 3 {
		appendP(15)
		total += 15 * logicalTxSize
		if catchUp {
			// The killed child's copy goes when the server sees its
			// session end.
			require.Eventually(t, func() bool { return copies() == 0 }, 60*time.Second, 10*time.Millisecond)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLogicalProjection$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+mode, dsnEnv+"="+s.DSN(), schemaEnv+"="+e.schema)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		for n := 0; n < 2+round && sc.Scan(); {
			if sc.Text() == "BATCH" {
				n++
			}
		}
		if catchUp {
			require.Equal(t, 1, copies(), "the child catches up through the SQL interface when killed (round %d)", round)
		} else {
			time.Sleep(time.Duration(round*13) * time.Millisecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		counts = append(counts, rmCount())
	}
	require.Less(t, counts[len(counts)-1], total, "the children were killed before the end")

	restart := time.Now()
	runLogicalProjection(t, store, e.quoted)
	require.Eventually(t, func() bool { return rmCount() >= total }, 60*time.Second, 10*time.Millisecond, "the projection catches up")
	recovery := time.Since(restart)
	v := verifyLogical(t, e)
	disorder := 0
	for i := 1; i < len(v.groups); i++ {
		if v.groups[i-1] > v.groups[i] { // one sequential writer: commit order is id order
			disorder++
		}
	}
	scenario := "L2 logical projection SIGKILL"
	if catchUp {
		scenario = "L3 logical projection SIGKILL during catch-up"
	}
	f := figures{Scenario: scenario, Attempts: 3, Acked: total, Lost: v.missing,
		Duplicated: v.rows - v.distinct, Partial: v.split, Recovery: recovery, Elapsed: time.Since(began),
		Note: fmt.Sprintf("3 children killed; rows committed when each died: %v; out of commit order: %d", counts, disorder)}
	record(t, f)
	require.Zero(t, v.missing, "events missing from the read model")
	require.Zero(t, v.rows-v.distinct, "events projected twice")
	require.Zero(t, v.extra, "rows of no event")
	require.Zero(t, v.split, "a transaction's events not contiguous or not in position order")
	require.Zero(t, disorder, "transactions not in commit order")
	require.Equal(t, total, v.rows)
}

// Scenario L4. A projection is switched between read modes, logical →
// tail → logical, while 8 writers append (single events, 50-event
// batches, AppendIf on the writer's own tag): each of the first two modes
// runs in a child process that is SIGKILLed inside a batch (rows written,
// not committed); the last mode runs here to the end. Every event exactly
// once, each transaction whole and contiguous, and in commit order: a
// transaction acknowledged before another began is handled before it.
// Before the fix the second logical period resumed from the logical
// checkpoint the tail period had left behind and handled its events again.
func TestLogicalModeSwitchLogicalTailLogical(t *testing.T) {
	logicalModeSwitch(t, "logical", "tail", "logical")
}

// Scenario L5. L4 the other way round: tail → logical → tail. Before the
// fix the second tail period resumed from the cursor and handled again the
// events that logical decoding had delivered beyond it (out of log order).
func TestLogicalModeSwitchTailLogicalTail(t *testing.T) {
	logicalModeSwitch(t, "tail", "logical", "tail")
}

func logicalModeSwitch(t *testing.T, modes ...string) {
	s := cluster(t)
	began := time.Now()
	e := newEnv(t)
	dropLogicalSlot(t, e)
	pool := newPool(t, "faults_switch", 12, nil)
	store := e.store(t, pool, nil)
	createOrderedRM(t, e)
	rmCount := func() int {
		var n int
		require.NoError(t, e.admin.QueryRow(context.Background(), `SELECT count(*) FROM `+e.quoted+`.rm`).Scan(&n))
		return n
	}

	// The writers, paced so that a reader keeps up (a logical checkpoint
	// names its consumed set only then; see logical.Checkpoint.Detached).
	type ack struct {
		xid        uint64
		start, end time.Time
	}
	var (
		mu     sync.Mutex
		acks   []ack
		failed int
	)
	wctx, wstop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			tag := fmt.Sprintf("w=%d", w)
			var last *cursor.Cursor
			for i := 0; wctx.Err() == nil; i++ {
				id := fmt.Sprint("w", w, "-", i)
				start := time.Now()
				var (
					res   pgdcb.AppendResult
					err   error
					pause = 25 * time.Millisecond
				)
				switch w % 4 {
				case 0, 1:
					res, err = store.Append(wctx, batch("P", id, 1, tag))
				case 2:
					res, err = store.Append(wctx, batch("P", id, 50, tag))
					pause = 150 * time.Millisecond
				default:
					res, err = store.AppendIf(wctx, batch("P", id, 1, tag), appendif.FailIf(query.Tagged([]string{"P"}, tag), last))
				}
				end := time.Now()
				mu.Lock()
				if err == nil {
					acks = append(acks, ack{xid: res.TransactionID, start: start, end: end})
					c := res.Cursor()
					last = &c
				} else if wctx.Err() == nil {
					failed++
				}
				mu.Unlock()
				select {
				case <-wctx.Done():
				case <-time.After(pause):
				}
			}
		})
	}
	defer func() { wstop(); wg.Wait() }()

	// Every mode but the last in a child, killed inside a batch once it
	// handled 1,000 more events (and, in logical mode, once its stored
	// checkpoint names what it consumed: the next mode needs that).
	var counts, beyond []int // rows, and rows past the stored cursor, at each kill
	for _, mode := range modes[:len(modes)-1] {
		n0 := rmCount()
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLogicalProjection$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+mode, dsnEnv+"="+s.DSN(), schemaEnv+"="+e.schema)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		batches := make(chan struct{}, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "BATCH" {
					select {
					case batches <- struct{}{}:
					default:
					}
				}
			}
		}()
		require.Eventually(t, func() bool {
			if rmCount() < n0+1000 {
				return false
			}
			if mode != "logical" {
				return true
			}
			var text *string
			require.NoError(t, e.admin.QueryRow(context.Background(), `SELECT logical_checkpoint FROM `+e.quoted+`.checkpoints WHERE name = 'rm'`).Scan(&text))
			if text == nil {
				return false
			}
			cp, err := logical.ParseCheckpoint(*text)
			require.NoError(t, err)
			return (cp.Done != nil) != (cp.Sync != nil) // what logical.Checkpoint.Detached takes

		}, 90*time.Second, 10*time.Millisecond, "the %s child handles events", mode)
		select { // drain, then kill inside the next batch
		case <-batches:
		default:
		}
		select {
		case <-batches:
		case <-time.After(60 * time.Second):
			t.Fatalf("the %s child wrote no batch", mode)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		counts = append(counts, rmCount())
		var past int
		require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM `+e.quoted+`.rm r, `+e.quoted+`.checkpoints c
			WHERE c.name = 'rm' AND (r.tx, r.position) > (c.transaction_id, c.position)`).Scan(&past))
		beyond = append(beyond, past)
	}

	restart := time.Now()
	cfg := logicalConfig()
	if modes[len(modes)-1] == "tail" {
		cfg.Logical = nil
	}
	runOrderedProjection(t, store, e.quoted, cfg)
	n := rmCount()
	require.Eventually(t, func() bool { return rmCount() > n+100 }, 60*time.Second, 10*time.Millisecond, "the last mode handles events")
	wstop()
	wg.Wait()
	var stored int
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM `+e.quoted+`.events WHERE type = 'P'`).Scan(&stored))
	require.Eventually(t, func() bool { return rmCount() >= stored }, 90*time.Second, 10*time.Millisecond, "the projection catches up")
	// Whatever is handled twice comes before the last event: wait until
	// the cursor has passed it, then count.
	var lastXID uint64
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT max(transaction_id)::text::bigint FROM `+e.quoted+`.events`).Scan(&lastXID))
	require.Eventually(t, func() bool {
		var at uint64
		require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT transaction_id::text::bigint FROM `+e.quoted+`.checkpoints WHERE name = 'rm'`).Scan(&at))
		return at >= lastXID
	}, 90*time.Second, 10*time.Millisecond, "the cursor passes the last event")
	recovery := time.Since(restart)
	v := verifyLogical(t, e)

	// Commit order: a transaction acknowledged before another began is
	// handled before it (it committed first, and has the lower id).
	mu.Lock()
	acked := slices.Clone(acks)
	failedN := failed
	mu.Unlock()
	idx := map[uint64]int{}
	for i, tx := range v.groups {
		if _, ok := idx[tx]; !ok {
			idx[tx] = i
		}
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].end.Before(acked[j].end) })
	prefix := make([]int, len(acked)) // the largest index among acked[:i+1]
	for i, a := range acked {
		prefix[i] = idx[a.xid]
		if i > 0 {
			prefix[i] = max(prefix[i], prefix[i-1])
		}
	}
	disorder := 0
	for _, b := range acked {
		k := sort.Search(len(acked), func(i int) bool { return !acked[i].end.Before(b.start) })
		if k > 0 && prefix[k-1] >= idx[b.xid] {
			disorder++
		}
	}

	label := "L4"
	if modes[0] == "tail" {
		label = "L5"
	}
	f := figures{Scenario: label + " mode switch " + strings.Join(modes, "→"), Attempts: len(acked) + failedN, Acked: len(acked),
		Definite: failedN, Lost: v.missing, Duplicated: v.rows - v.distinct, Partial: v.split,
		Recovery: recovery, Elapsed: time.Since(began),
		Note: fmt.Sprintf("%d events in %d transactions; children killed at %v rows, %v of them past the stored cursor; out of commit order: %d", stored, len(acked), counts, beyond, disorder)}
	record(t, f)
	require.Zero(t, v.missing, "events missing from the read model")
	require.Zero(t, v.rows-v.distinct, "events projected twice")
	require.Zero(t, v.extra, "rows of no event")
	require.Zero(t, v.split, "a transaction's events not contiguous or not in position order")
	require.Zero(t, disorder, "transactions not in commit order")
	require.Equal(t, stored, v.rows)
}
