package logical_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
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
	er, err := store.AppendTx(ctx, early, []eventstore.Event{event(t, "E", "k=early"), event(t, "E", "k=early")})
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

// TestCatchUpSwitchesToStream: a reader catching up while one writer keeps
// committing transactions hands over to the stream once a call reaches the
// end of the WAL; every event of the backlog and of the writer arrives
// once, in commit order (one sequential writer: log order), across the
// switch.
func TestCatchUpSwitchesToStream(t *testing.T) {
	store, _ := newStore(t)
	ctx := t.Context()
	// A backlog of 200 events is a catch-up; streaming, the reader would
	// go back to one only 128 KiB behind.
	cfg := &logical.Config{CatchUpBytes: 16 << 10, CatchUpChunk: 50}
	cp, tail := openEmpty(t, store, "r", cfg)
	var (
		mu   sync.Mutex
		want []int64
	)
	for range 10 {
		want = append(want, appendN(t, store, 20)...)
	}
	rd, err := logical.Open(ctx, store, "r", query.All(), cp, tail, cfg)
	require.NoError(t, err)
	defer rd.Close(context.Background())

	wctx, wstop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for wctx.Err() == nil {
			res, err := store.Append(wctx, []eventstore.Event{event(t, "E", "k=w"), event(t, "E", "k=w"), event(t, "E", "k=w")})
			if err != nil {
				return
			}
			mu.Lock()
			want = append(want, res.Positions...)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	})
	defer func() { wstop(); wg.Wait() }()

	var got []int64
	caughtUp, streamed := false, 0
	end := time.Now().Add(deadline)
	// Until the reader streams and has streamed 10 of the writer's
	// transactions.
	for streamed < 30 {
		require.True(t, time.Now().Before(end), "switched to the stream: %v, events streamed: %d", caughtUp, streamed)
		b, err := rd.Next(ctx, 25, 100*time.Millisecond)
		require.NoError(t, err)
		if len(got) == 0 && len(b.Events) > 0 {
			require.True(t, logical.CatchingUp(rd), "the backlog is read through the SQL interface")
		}
		if !logical.CatchingUp(rd) {
			caughtUp = true
			streamed += len(b.Events)
		}
		got = append(got, evPositions(b.Events)...)
		require.NoError(t, rd.Confirm(ctx, b.Checkpoint))
	}
	wstop()
	wg.Wait()
	mu.Lock()
	n := len(want)
	mu.Unlock()
	for len(got) < n {
		got = append(got, evPositions(nextEvents(t, rd, 100).Events)...)
	}
	require.Equal(t, want, got)
}

// TestCatchUpOpenTransactionDelaysNothing: a transaction of the same
// database holding an xid, and one that appended events, both open for the
// whole catch-up, delay none of the backlog: every committed event is read
// through the SQL interface while both are provably still open.
func TestCatchUpOpenTransactionDelaysNothing(t *testing.T) {
	store, pool := newStore(t)
	ctx := t.Context()
	cfg := catchUpCfg()
	cp, tail := openEmpty(t, store, "r", cfg)

	holder, holdXID := holdXact(t, pool)
	appender, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer appender.Rollback(context.Background())
	open, err := store.AppendTx(ctx, appender, []eventstore.Event{event(t, "E", "k=open")})
	require.NoError(t, err)
	var want []int64
	for range 8 {
		want = append(want, appendN(t, store, 25)...)
	}

	rd, err := logical.Open(ctx, store, "r", query.All(), cp, tail, cfg)
	require.NoError(t, err)
	defer rd.Close(context.Background())
	var got []int64
	for len(got) < len(want) {
		b := nextEvents(t, rd, 30)
		require.True(t, logical.CatchingUp(rd))
		got = append(got, evPositions(b.Events)...)
		require.NoError(t, rd.Confirm(ctx, b.Checkpoint))
	}
	require.Equal(t, want, got)
	var still *uint64
	require.NoError(t, holder.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()`).Scan(&still))
	require.NotNil(t, still)
	require.Equal(t, holdXID, *still)
	require.NoError(t, appender.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()`).Scan(&still))
	require.NotNil(t, still)
	require.Equal(t, open.TransactionID, *still)

	require.NoError(t, appender.Commit(ctx))
	b := nextEvents(t, rd, 30)
	require.Equal(t, open.Positions, evPositions(b.Events))
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
	end := time.Now().Add(deadline)
	for len(got) < len(want) {
		require.True(t, time.Now().Before(end), "got %d of %d", len(got), len(want))
		b, err := rd.Next(ctx, 20, 100*time.Millisecond)
		require.NoError(t, err)
		caughtUp = caughtUp || logical.CatchingUp(rd)
		got = append(got, evPositions(b.Events)...)
		require.NoError(t, rd.Confirm(ctx, b.Checkpoint))
	}
	require.True(t, caughtUp, "the reader switched to a catch-up")
	require.Equal(t, want, got)
	more := appendN(t, store, 2)
	var rest []int64
	for len(rest) < 2 {
		rest = append(rest, evPositions(nextEvents(t, rd, 10).Events)...)
	}
	require.Equal(t, more, rest)
}
