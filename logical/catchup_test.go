package logical_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/query"
)

// catchUpCfg makes every (re)start with any backlog a catch-up through the
// SQL interface, in calls of 50 changes.
func catchUpCfg() *logical.Config { return &logical.Config{CatchUpBytes: 1, CatchUpChunk: 50} }

// openEmpty opens reader name with cfg on store and reads the initial read
// of an empty log; it returns the checkpoint after it (the slot exists).
func openEmpty(t *testing.T, store *eventstore.Store, name string, cfg *logical.Config) (logical.Checkpoint, cursor.Cursor) {
	t.Helper()
	useSlot(store, name)
	rd, err := logical.Open(t.Context(), store, name, query.All(), logical.Checkpoint{}, cursor.Start, cfg)
	require.NoError(t, err)
	b, err := rd.Next(t.Context(), 10, 10*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, b.Events)
	require.Nil(t, b.Checkpoint.Sync)
	require.NoError(t, rd.Close(t.Context()))
	return b.Checkpoint, b.Tail
}

// tempSlots counts the temporary copies of slot (a catch-up in progress).
func tempSlots(t *testing.T, pool *pgxpool.Pool, slot string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots
		WHERE temporary AND starts_with(slot_name::text, $1 || '_c')`, slot).Scan(&n))
	return n
}

// TestCatchUpBacklogExactlyOnceInCommitOrder: a backlog of many chunks,
// with a transaction that appended first and committed last, is read
// through the SQL interface (a temporary copy of the slot exists while it
// is, and the reader says so), in commit order, each event once; a reader
// reopened in the middle from a checkpoint that was stored but never
// confirmed continues exactly once; the reader's own slot is not moved
// before a Confirm.
func TestCatchUpBacklogExactlyOnceInCommitOrder(t *testing.T) {
	store, pool := newStore(t)
	ctx := t.Context()
	cfg := catchUpCfg()
	cp, tail := openEmpty(t, store, "r", cfg)
	slot := logical.SlotName(store.Schema(), "r")

	early, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer early.Rollback(context.Background())
	er, err := store.AppendTx(ctx, early, []pgdcb.Event{event(t, "E", "k=early"), event(t, "E", "k=early")})
	require.NoError(t, err)
	var want []int64 // commit order
	for range 12 {
		want = append(want, appendN(t, store, 30)...)
	}
	require.NoError(t, early.Commit(ctx))
	want = append(want, er.Positions...)
	want = append(want, appendN(t, store, 7)...)
	before, err := logical.GetSlotStatus(ctx, pool, slot)
	require.NoError(t, err)

	read := func(cp logical.Checkpoint, tail cursor.Cursor, upTo int, confirm bool) ([]int64, logical.Checkpoint, cursor.Cursor) {
		rd, err := logical.Open(ctx, store, "r", query.All(), cp, tail, cfg)
		require.NoError(t, err)
		defer rd.Close(context.Background())
		var got []int64
		for len(got) < upTo {
			b := nextEvents(t, rd, 25)
			require.True(t, logical.CatchingUp(rd), "the backlog is read through the SQL interface")
			require.Equal(t, 1, tempSlots(t, pool, slot), "a temporary copy of the slot while catching up")
			got = append(got, evPositions(b.Events)...)
			cp, tail = b.Checkpoint, b.Tail
			if confirm {
				require.NoError(t, rd.Confirm(ctx, cp))
			}
		}
		return got, cp, tail
	}
	got, cp2, tail2 := read(cp, tail, 150, false)
	st, err := logical.GetSlotStatus(ctx, pool, slot)
	require.NoError(t, err)
	require.Equal(t, before.ConfirmedFlush, st.ConfirmedFlush, "nothing confirmed: the slot did not move")
	// What would be stored, parsed back; never confirmed.
	cp2, err = logical.ParseCheckpoint(cp2.String())
	require.NoError(t, err)
	rest, _, _ := read(cp2, tail2, len(want)-len(got), true)
	got = append(got, rest...)
	require.Equal(t, want, got)
	require.Eventually(t, func() bool { return tempSlots(t, pool, slot) == 0 }, deadline, 10*time.Millisecond,
		"the temporary copy goes with the reader's connection")
}

// evRef names an appended event.
type evRef struct {
	xid uint64
	pos int64
}

func (e evRef) String() string { return fmt.Sprintf("%d/%d", e.xid, e.pos) }

func refsOf(res pgdcb.AppendResult) []evRef {
	out := make([]evRef, len(res.Positions))
	for i, p := range res.Positions {
		out[i] = evRef{res.TransactionID, p}
	}
	return out
}

// ledger is the exact account of a race test: the events committed, in
// commit order, those of transactions still open, and those the reader
// handed out. batch checks every batch against it, so that a lost,
// repeated or reordered event, or a checkpoint that says otherwise, fails
// the test at the batch that shows it.
type ledger struct {
	mu      sync.Mutex
	want    []evRef            // committed, in commit order
	open    map[uint64][]evRef // appended by transactions still open
	got     []evRef            // handed out
	matched int                // got[:matched] equals want[:matched]
	cp      logical.Checkpoint // the last batch's
	tail    cursor.Cursor
	batches int
}

func newLedger(cp logical.Checkpoint, tail cursor.Cursor) *ledger {
	return &ledger{open: map[uint64][]evRef{}, cp: cp, tail: tail}
}

// committed records an append that has committed (the caller commits one
// transaction at a time, so the calls are in commit order).
func (l *ledger) committed(res pgdcb.AppendResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.want = append(l.want, refsOf(res)...)
}

// opened records an append of a transaction still open.
func (l *ledger) opened(res pgdcb.AppendResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open[res.TransactionID] = refsOf(res)
}

// ended records the end of open transaction xid: committed (its events
// follow every event committed before) or rolled back.
func (l *ledger) ended(xid uint64, committed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if committed {
		l.want = append(l.want, l.open[xid]...)
	}
	delete(l.open, xid)
}

// counts: events committed and handed out so far.
func (l *ledger) counts() (committed, handedOut int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.want), len(l.got)
}

// resumeAt is the last batch's checkpoint as it would be stored (its text
// parsed back) and its tail.
func (l *ledger) resumeAt(t *testing.T) (logical.Checkpoint, cursor.Cursor) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	cp, err := logical.ParseCheckpoint(l.cp.String())
	require.NoError(t, err)
	return cp, l.tail
}

// batch records b and checks it: the events handed out so far are the
// events committed, in commit order, each once (as far as the committed
// ones are known: a concurrent writer records its commit after the reader
// may have had it); the checkpoint and the tail never move back; the tail
// passes no event not handed out; the checkpoint's consumed set (Done),
// when it has one, names every event handed out (or the tail passed it) and
// none of the others, committed or still open.
func (l *ledger) batch(t *testing.T, b logical.Batch) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches++
	cp := b.Checkpoint
	require.Nil(t, cp.Sync)
	require.False(t, cp.LSN < l.cp.LSN || cp.LSN == l.cp.LSN && cp.Skip < l.cp.Skip,
		"batch %d: the checkpoint moved back from %s to %s", l.batches, l.cp, cp)
	require.GreaterOrEqual(t, cursor.Compare(b.Tail.TransactionID, b.Tail.Position, l.tail.TransactionID, l.tail.Position), 0,
		"batch %d: the tail moved back from %s to %s", l.batches, l.tail, b.Tail)
	l.cp, l.tail = cp, b.Tail
	for _, ev := range b.Events {
		l.got = append(l.got, evRef{ev.TransactionID, ev.Position})
	}
	for ; l.matched < len(l.got) && l.matched < len(l.want); l.matched++ {
		if l.got[l.matched] != l.want[l.matched] {
			t.Fatalf("batch %d: event #%d handed out is %s, want %s (commit order, each once); around it: handed out %v, committed %v",
				l.batches, l.matched, l.got[l.matched], l.want[l.matched], around(l.got, l.matched), around(l.want, l.matched))
		}
	}
	consumed := func(e evRef) bool {
		return cursor.Compare(e.xid, e.pos, b.Tail.TransactionID, b.Tail.Position) <= 0 ||
			cp.Done != nil && cp.Done.Has(e.xid, e.pos)
	}
	notConsumed := func(e evRef, what string) {
		if consumed(e) {
			t.Fatalf("batch %d: event %s (%s) not handed out, but the tail %s or the checkpoint %s names it consumed",
				l.batches, e, what, b.Tail, cp)
		}
	}
	if cp.Done != nil {
		for i, e := range l.got {
			if !consumed(e) {
				t.Fatalf("batch %d: event #%d %s handed out, but neither the tail %s nor the checkpoint %s names it consumed",
					l.batches, i, e, b.Tail, cp)
			}
		}
	}
	for _, e := range l.want[l.matched:] {
		notConsumed(e, "committed")
	}
	for _, evs := range l.open {
		for _, e := range evs {
			notConsumed(e, "of an open transaction")
		}
	}
}

func around(s []evRef, i int) []evRef { return s[max(0, i-3):min(len(s), i+4)] }

// next reads a batch of at most max events (waiting at most 100 ms),
// checks it (batch) and confirms its checkpoint.
func (l *ledger) next(t *testing.T, rd *logical.Reader, max int) logical.Batch {
	t.Helper()
	b, err := rd.Next(t.Context(), max, 100*time.Millisecond)
	require.NoError(t, err)
	l.batch(t, b)
	require.NoError(t, rd.Confirm(t.Context(), b.Checkpoint))
	return b
}

// drain reads until every committed event was handed out, and checks that
// the two lists are equal.
func (l *ledger) drain(t *testing.T, rd *logical.Reader, max int) {
	t.Helper()
	await.Until(t, deadline, func() (bool, string) {
		want, got := l.counts()
		if got >= want {
			return true, ""
		}
		l.next(t, rd, max)
		return false, fmt.Sprintf("handed out %d of %d events", got, want)
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Equal(t, l.want, l.got)
}

// walAt is the server's WAL flush position (what a reader can have read:
// the WAL insert position its samples read is at or after it).
func walAt(t *testing.T, pool *pgxpool.Pool) pglogrepl.LSN {
	t.Helper()
	var text string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT pg_current_wal_flush_lsn()::text`).Scan(&text))
	lsn, err := pglogrepl.ParseLSN(text)
	require.NoError(t, err)
	return lsn
}

// awaitWAL waits until the server has flushed n bytes of WAL beyond from.
func awaitWAL(t *testing.T, pool *pgxpool.Pool, from pglogrepl.LSN, n int64) {
	t.Helper()
	await.Until(t, deadline, func() (bool, string) {
		got := int64(walAt(t, pool)) - int64(from)
		return got >= n, fmt.Sprintf("%d of %d bytes of WAL beyond %s", got, n, from)
	})
}

// TestCatchUpSwitchesToStream: one writer keeps committing transactions
// (1 to 5 events each, one after another: commit order is log order) for
// the whole test, and the reader enters a catch-up five times, each time
// handing over to the stream once a call reaches the end of the WAL while
// the writer commits: by a restart from its stored checkpoint a varying
// backlog behind (calls of 50, 120 and 400 changes), and by falling 8 times
// CatchUpBytes behind while streaming (the writer racing ahead while the
// reader does not read). Batches of 3 to 60 events move the switch point
// within the writer's transactions. Every batch is checked (ledger.batch):
// each event once, in commit order, the checkpoint and the tail consistent
// with what was handed out; at the end every committed event was handed
// out, and a reader reopened from the last checkpoint hands out exactly
// the events committed after it.
func TestCatchUpSwitchesToStream(t *testing.T) {
	defer logical.SetCatchUpAfter(0)()
	store, pool := newStore(t)
	ctx := t.Context()
	const catchUpBytes = 8 << 10 // a catch-up on a restart 8 KiB behind; streaming, 64 KiB behind
	cfg := func(chunk int) *logical.Config {
		// Confirm moves the slot during the catch-ups too.
		return &logical.Config{CatchUpBytes: catchUpBytes, CatchUpChunk: chunk, StatusInterval: 50 * time.Millisecond}
	}
	cp, tail := openEmpty(t, store, "r", cfg(50))
	l := newLedger(cp, tail)

	// The writer: paced, unless the test lets the reader fall behind.
	var stop, burst atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			evs := make([]pgdcb.Event, 1+i%5)
			for j := range evs {
				ev, err := pgdcb.NewEvent("E", map[string]any{"i": i, "j": j}, "k=w")
				if err != nil {
					t.Errorf("writer: %v", err)
					return
				}
				evs[j] = ev
			}
			// Not cancelled by the test's end: an append that failed
			// after its commit would be missing from the ledger.
			res, err := store.Append(context.Background(), evs)
			if err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			l.committed(res)
			if !burst.Load() {
				time.Sleep(3 * time.Millisecond)
			}
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	// behind lets the writer write n bytes of WAL beyond from at full speed.
	behind := func(from pglogrepl.LSN, n int64) {
		burst.Store(true)
		defer burst.Store(false)
		awaitWAL(t, pool, from, n)
	}

	rounds := []struct {
		fallBehind bool  // else a restart from the stored checkpoint
		chunk      int   // CatchUpChunk of a restart
		lag        int64 // WAL behind when restarting, or written while not reading
		max        int   // events per batch
		streamed   int   // events streamed after the switch before the next round
	}{
		{chunk: 50, lag: 3 * catchUpBytes, max: 25, streamed: 30},
		{fallBehind: true, lag: 16 * catchUpBytes, max: 10, streamed: 20},
		{chunk: 120, lag: 6 * catchUpBytes, max: 60, streamed: 10},
		{fallBehind: true, lag: 20 * catchUpBytes, max: 40, streamed: 40},
		{chunk: 400, lag: 12 * catchUpBytes, max: 3, streamed: 15},
	}
	var rd *logical.Reader
	defer func() {
		if rd != nil {
			_ = rd.Close(context.Background())
		}
	}()
	for i, rc := range rounds {
		end := time.Now().Add(deadline)
		_, atStart := l.counts()
		// The server's running transactions logged, where the slot's
		// restart point (from which every catch-up call decodes again)
		// may move, as it does every 15 s of writing: the calls stay
		// short enough that the catch-up outpaces the writer.
		_, err := pool.Exec(ctx, `CHECKPOINT`)
		require.NoError(t, err)
		if !rc.fallBehind {
			if rd != nil {
				require.NoError(t, rd.Close(ctx))
			}
			cp, tail := l.resumeAt(t)
			behind(cp.LSN, rc.lag)
			rd, err = logical.Open(ctx, store, "r", query.All(), cp, tail, cfg(rc.chunk))
			require.NoError(t, err)
			b := l.next(t, rd, rc.max)
			require.True(t, logical.CatchingUp(rd), "round %d: a restart %d bytes behind catches up", i, rc.lag)
			require.NotEmpty(t, b.Events, "round %d", i)
		} else {
			// Not reading while the writer writes lag bytes; the
			// reader's next sample of the log finds it that far behind.
			// When the stream had read ahead enough to catch up without
			// a catch-up, again.
			for !logical.CatchingUp(rd) {
				require.True(t, time.Now().Before(end), "round %d: the stream never fell behind into a catch-up", i)
				behind(walAt(t, pool), rc.lag)
				for {
					b := l.next(t, rd, rc.max)
					if logical.CatchingUp(rd) || len(b.Events) < rc.max {
						break
					}
				}
			}
		}
		for logical.CatchingUp(rd) {
			require.True(t, time.Now().Before(end), "round %d: the catch-up never switched to the stream", i)
			l.next(t, rd, rc.max)
		}
		_, atSwitch := l.counts()
		// (A loaded machine may let the stream fall behind again: one
		// more catch-up, checked all the same.)
		for streamed := 0; streamed < rc.streamed; {
			require.True(t, time.Now().Before(end), "round %d: streamed %d events", i, streamed)
			b := l.next(t, rd, rc.max)
			if !logical.CatchingUp(rd) {
				streamed += len(b.Events)
			}
		}
		t.Logf("round %d: from event #%d, the stream from #%d", i, atStart, atSwitch)
	}
	stop.Store(true)
	wg.Wait()
	l.drain(t, rd, 100)

	// The last checkpoint, stored and reopened, is exact: the reader hands
	// out only what was committed after it.
	require.NoError(t, rd.Close(ctx))
	cp, tail = l.resumeAt(t)
	rd, err := logical.Open(ctx, store, "r", query.All(), cp, tail, cfg(50))
	require.NoError(t, err)
	res, err := store.Append(ctx, []pgdcb.Event{event(t, "E", "k=last"), event(t, "E", "k=last")})
	require.NoError(t, err)
	l.committed(res)
	l.drain(t, rd, 100)
}

// TestCatchUpOpenTransactionDelaysNothing: transactions of the same
// database left open across a catch-up (one holding an xid, others that
// appended events) delay none of it: every event committed before the
// reader (re)started is handed out through the SQL interface while they
// are provably still open. Four rounds, each a restart from the stored
// checkpoint with a new backlog, the open appenders ending at different
// points: committed once the backlog is out, committed and rolled back in
// the middle of the catch-up, and one left open through the switch to
// the stream and a restart, committed early in the next round's catch-up.
// A CHECKPOINT while they are open logs them running, where the slot's
// restart point may move. Every batch is checked (ledger.batch): each
// committed event once, in commit order, no event of a rolled back
// transaction, the checkpoint and the tail consistent with what was handed
// out; a reader reopened from the last checkpoint hands out exactly the
// events committed after it.
func TestCatchUpOpenTransactionDelaysNothing(t *testing.T) {
	store, pool := newStore(t)
	ctx := t.Context()
	cfg := func(chunk int) *logical.Config {
		// Every restart with a backlog is a catch-up; Confirm moves the
		// slot during it.
		return &logical.Config{CatchUpBytes: 1, CatchUpChunk: chunk, StatusInterval: 20 * time.Millisecond}
	}
	cp, tail := openEmpty(t, store, "r", cfg(50))
	l := newLedger(cp, tail)

	type openTx struct {
		tx  pgx.Tx
		xid uint64
	}
	begin := func(n int) openTx {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		evs := make([]pgdcb.Event, n)
		for i := range evs {
			evs[i] = event(t, "E", "k=open")
		}
		res, err := store.AppendTx(ctx, tx, evs)
		require.NoError(t, err)
		l.opened(res)
		return openTx{tx, res.TransactionID}
	}
	end := func(o openTx, commit bool) {
		if commit {
			require.NoError(t, o.tx.Commit(ctx))
		} else {
			require.NoError(t, o.tx.Rollback(ctx))
		}
		l.ended(o.xid, commit)
	}
	stillOpen := func(tx pgx.Tx, xid uint64) {
		var still *uint64
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()`).Scan(&still))
		require.NotNil(t, still)
		require.Equal(t, xid, *still)
	}
	checkpointNow := func() {
		_, err := pool.Exec(ctx, `CHECKPOINT`)
		require.NoError(t, err)
	}

	const (
		afterBacklog   = iota // committed once the backlog was handed out
		midway                // committed once half of it was
		midwayRollback        // rolled back once three quarters were
		carried               // open through the switch and the restart; committed after the next round's first batch
	)
	rounds := []struct {
		chunk, max int
		backlog    []int // transactions, of so many events each
		open       []int // the round's appenders
	}{
		{chunk: 50, max: 30, backlog: repeat(8, 25), open: []int{afterBacklog}},
		{chunk: 17, max: 7, backlog: []int{1, 6, 2, 5, 3, 4, 1, 6, 2, 5, 3, 4, 1, 6, 2, 5, 3, 4, 1, 6, 2, 5}, open: []int{midway, midwayRollback}},
		{chunk: 200, max: 50, backlog: repeat(10, 20), open: []int{carried}},
		{chunk: 5, max: 13, backlog: repeat(12, 3), open: []int{afterBacklog}},
	}
	var (
		rd   *logical.Reader
		left *openTx // carried into the next round
	)
	defer func() {
		if rd != nil {
			_ = rd.Close(context.Background())
		}
	}()
	for i, rc := range rounds {
		if rd != nil {
			require.NoError(t, rd.Close(ctx))
		}
		holder, holdXID := holdXact(t, pool)
		ends := map[int]openTx{}
		for j, what := range rc.open {
			ends[what] = begin(1 + j)
		}
		checkpointNow()
		base, _ := l.counts() // every earlier event was handed out
		for j, n := range rc.backlog {
			if j == len(rc.backlog)/2 {
				checkpointNow()
			}
			l.committed(appendRes(t, store, n))
		}
		backlog, _ := l.counts()

		cp, tail := l.resumeAt(t)
		var err error
		rd, err = logical.Open(ctx, store, "r", query.All(), cp, tail, cfg(rc.chunk))
		require.NoError(t, err)
		first := true
		deadlineAt := time.Now().Add(deadline)
		for {
			_, got := l.counts()
			if got >= backlog {
				break
			}
			require.True(t, time.Now().Before(deadlineAt), "round %d: handed out %d of %d", i, got, backlog)
			b := l.next(t, rd, rc.max)
			if len(b.Events) == 0 {
				continue
			}
			require.True(t, logical.CatchingUp(rd), "round %d: the backlog is read through the SQL interface", i)
			_, got = l.counts()
			if first && left != nil {
				end(*left, true) // began before the checkpoint the catch-up started from
				left = nil
			}
			first = false
			if o, ok := ends[midway]; ok && (got-base)*2 >= backlog-base {
				end(o, true)
				delete(ends, midway)
			}
			if o, ok := ends[midwayRollback]; ok && (got-base)*4 >= (backlog-base)*3 {
				end(o, false)
				delete(ends, midwayRollback)
			}
		}
		// The backlog is out, and the round's open transactions still open.
		stillOpen(holder, holdXID)
		for _, o := range ends {
			stillOpen(o.tx, o.xid)
		}
		if o, ok := ends[afterBacklog]; ok {
			end(o, true)
		}
		if o, ok := ends[carried]; ok {
			left = &o
		}
		l.drain(t, rd, rc.max)
		// The switch to the stream, with the carried transaction (if
		// any) still open.
		deadlineAt = time.Now().Add(deadline)
		for logical.CatchingUp(rd) {
			require.True(t, time.Now().Before(deadlineAt), "round %d: the catch-up never switched to the stream", i)
			l.next(t, rd, rc.max)
		}
		l.committed(appendRes(t, store, 2))
		l.drain(t, rd, rc.max)
		require.NoError(t, holder.Rollback(ctx))
	}
	require.Nil(t, left)

	// The last checkpoint, stored and reopened, is exact.
	require.NoError(t, rd.Close(ctx))
	cp, tail = l.resumeAt(t)
	rd, err := logical.Open(ctx, store, "r", query.All(), cp, tail, cfg(50))
	require.NoError(t, err)
	l.committed(appendRes(t, store, 3))
	l.drain(t, rd, 10)
}

func repeat(n, v int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// appendRes appends n events in one transaction.
func appendRes(t *testing.T, store *eventstore.Store, n int) pgdcb.AppendResult {
	t.Helper()
	evs := make([]pgdcb.Event, n)
	for i := range evs {
		evs[i] = event(t, "E", "k=v")
	}
	res, err := store.Append(t.Context(), evs)
	require.NoError(t, err)
	return res
}

// TestStreamFallenBehindCatchesUp: a streaming reader that falls 8 times
// CatchUpBytes behind (a backlog appended while it did not read, events of
// a split transaction read from the stream but not handed out) closes the
// stream and catches up through the SQL interface from its checkpoint:
// every event once, in commit order, and then the stream again.
func TestStreamFallenBehindCatchesUp(t *testing.T) {
	defer logical.SetCatchUpAfter(0)()
	store, _ := newStore(t)
	ctx := t.Context()
	cfg := &logical.Config{CatchUpBytes: 8 << 10, CatchUpChunk: 50}
	cp, tail := openEmpty(t, store, "r", cfg)
	rd, err := logical.Open(ctx, store, "r", query.All(), cp, tail, cfg)
	require.NoError(t, err)
	defer rd.Close(context.Background())
	want := appendN(t, store, 5)
	b := nextEvents(t, rd, 3) // from the stream, the transaction split
	require.False(t, logical.CatchingUp(rd))
	got := evPositions(b.Events)
	require.NoError(t, rd.Confirm(ctx, b.Checkpoint))
	for range 10 { // about 64 KiB of WAL and more
		want = append(want, appendN(t, store, 30)...)
	}
	caughtUp := false
	await.Until(t, deadline, func() (bool, string) {
		b, err := rd.Next(ctx, 20, 100*time.Millisecond)
		require.NoError(t, err)
		caughtUp = caughtUp || logical.CatchingUp(rd)
		got = append(got, evPositions(b.Events)...)
		require.NoError(t, rd.Confirm(ctx, b.Checkpoint))
		return len(got) >= len(want), fmt.Sprintf("got %d of %d", len(got), len(want))
	})
	require.True(t, caughtUp, "the reader switched to a catch-up")
	require.Equal(t, want, got)
	more := appendN(t, store, 2)
	var rest []int64
	for len(rest) < 2 {
		rest = append(rest, evPositions(nextEvents(t, rd, 10).Events)...)
	}
	require.Equal(t, more, rest)
}
