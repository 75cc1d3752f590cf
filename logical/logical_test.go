package logical_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// deadline bounds every wait for observable state: the machine is shared and
// loaded, so it is a bound, not an expectation.
const deadline = 60 * time.Second

func event(t testing.TB, typ string, tags ...string) pgdcb.Event {
	t.Helper()
	ev, err := pgdcb.NewEvent(typ, map[string]any{"at": time.Now().UnixNano()}, tags...)
	require.NoError(t, err)
	return ev
}

// rmRow is one read-model row: an event as the handler saw it, in the order
// handled.
type rmRow struct {
	Position int64
	TxID     uint64
}

// readModel creates the read model table (one row per handled event, no
// unique constraint so that a duplicate would show) and returns its handler.
func readModel(t *testing.T, store *eventstore.Store) (projection.Handler, func() []rmRow) {
	t.Helper()
	quoted := pgx.Identifier{store.Schema()}.Sanitize()
	_, err := store.Pool().Exec(t.Context(), `CREATE TABLE `+quoted+`.rm (seq bigserial PRIMARY KEY, position bigint NOT NULL, tx xid8 NOT NULL)`)
	require.NoError(t, err)
	h := func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		for _, ev := range evs {
			if _, err := tx.Exec(ctx, `INSERT INTO `+quoted+`.rm (position, tx) VALUES ($1, $2::xid8)`, ev.Position, ev.TransactionID); err != nil {
				return err
			}
		}
		return nil
	}
	rows := func() []rmRow {
		rs, err := store.Pool().Query(context.Background(), `SELECT position, tx FROM `+quoted+`.rm ORDER BY seq`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (rmRow, error) {
			var x rmRow
			return x, r.Scan(&x.Position, &x.TxID)
		})
		require.NoError(t, err)
		return out
	}
	return h, rows
}

func projConfig() *projection.Config {
	return &projection.Config{
		Logical:   &logical.Config{},
		BatchSize: 100,
		ReaderConfig: projection.ReaderConfig{
			PollInterval:      50 * time.Millisecond,
			ElectionInterval:  50 * time.Millisecond,
			HeartbeatInterval: 200 * time.Millisecond,
			RetryMin:          20 * time.Millisecond,
			RetryMax:          200 * time.Millisecond,
			MaxAttempts:       projection.RetryForever,
		},
	}
}

// startRunner runs the projection until the test ends (or stop is called).
func startRunner(t *testing.T, store *eventstore.Store, name string, h projection.Handler, cfg *projection.Config) (stop func()) {
	t.Helper()
	useSlot(store, name)
	r, err := projection.New(store, name, query.All(), h, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(deadline):
			t.Fatal("runner did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitRows waits until the read model holds n rows.
func waitRows(t *testing.T, rows func() []rmRow, n int) []rmRow {
	t.Helper()
	var got []rmRow
	ok := assert.Eventually(t, func() bool { got = rows(); return len(got) >= n }, deadline, 10*time.Millisecond)
	if !ok {
		t.Fatalf("read model has %d rows, want %d: %v", len(got), n, got)
	}
	return got
}

func positions(rs []rmRow) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Position
	}
	return out
}

// appendN appends n events in one transaction and returns their positions.
func appendN(t *testing.T, store *eventstore.Store, n int) []int64 {
	t.Helper()
	return appendRes(t, store, n).Positions
}

// checkpoint reads the projection's stored cursor and logical checkpoint.
func checkpoint(t *testing.T, store *eventstore.Store, name string) (cursor.Cursor, string) {
	t.Helper()
	var (
		c    cursor.Cursor
		text *string
	)
	err := store.Pool().QueryRow(t.Context(), `SELECT transaction_id, position, logical_checkpoint FROM `+
		pgx.Identifier{store.Schema()}.Sanitize()+`.checkpoints WHERE name = $1`, name).Scan(&c.TransactionID, &c.Position, &text)
	require.NoError(t, err)
	if text == nil {
		return c, ""
	}
	return c, *text
}

// TestInitialReadThenStream: events committed before the slot existed come
// from the snapshot read, later ones from the stream; each exactly once.
func TestInitialReadThenStream(t *testing.T) {
	store, _ := newStore(t)
	h, rows := readModel(t, store)
	var want []int64
	want = append(want, appendN(t, store, 3)...)
	want = append(want, appendN(t, store, 1)...)
	startRunner(t, store, "p", h, projConfig())
	waitRows(t, rows, 4)
	want = append(want, appendN(t, store, 2)...)
	want = append(want, appendN(t, store, 250)...) // more than a batch
	got := waitRows(t, rows, len(want))
	require.Equal(t, want, positions(got))
	_, cp := checkpoint(t, store, "p")
	require.NotEmpty(t, cp)
	parsed, err := logical.ParseCheckpoint(cp)
	require.NoError(t, err)
	require.Nil(t, parsed.Sync, "the initial read is over")
}

// TestOpenTransactionDoesNotDelay: a transaction of the same database that
// holds an xid, and one that appended events and stays open, do not delay
// delivery of a later commit: it is delivered while both are provably still
// open (their transaction ids are still assigned when the read model has
// the event). Events arrive in commit order, and the stored cursor never
// passes the open appender's events.
func TestOpenTransactionDoesNotDelay(t *testing.T) {
	store, pool := newStore(t)
	h, rows := readModel(t, store)
	first := appendN(t, store, 1)
	startRunner(t, store, "p", h, projConfig())
	waitRows(t, rows, 1) // the slot exists: creating it waits for running transactions

	ctx := t.Context()
	holder, holdXID := holdXact(t, pool)

	appender, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer appender.Rollback(context.Background())
	early, err := store.AppendTx(ctx, appender, []pgdcb.Event{event(t, "E", "k=early")})
	require.NoError(t, err)

	// The default mode is held: the tail horizon is at or below the holder.
	tb, err := store.ReadTail(ctx, query.All(), cursor.Start, 0)
	require.NoError(t, err)
	require.LessOrEqual(t, tb.Horizon, holdXID)

	late := appendN(t, store, 1)
	got := waitRows(t, rows, 2)
	require.Equal(t, []int64{first[0], late[0]}, positions(got))
	// Both are still open: their ids are still assigned.
	var still *uint64
	require.NoError(t, holder.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()`).Scan(&still))
	require.NotNil(t, still)
	require.Equal(t, holdXID, *still)
	require.NoError(t, appender.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()`).Scan(&still))
	require.NotNil(t, still)
	require.Equal(t, early.TransactionID, *still)

	// The stored cursor is before the open appender's event: an AppendIf
	// after it sees that event as new.
	c, _ := checkpoint(t, store, "p")
	require.Negative(t, cursor.Compare(c.TransactionID, c.Position, early.TransactionID, early.Positions[0]),
		"cursor %s passed the open transaction's event (%d, %d)", c, early.TransactionID, early.Positions[0])

	require.NoError(t, appender.Commit(ctx))
	got = waitRows(t, rows, 3)
	// Commit order: the early transaction (lower id and position) comes after.
	require.Equal(t, []int64{first[0], late[0], early.Positions[0]}, positions(got))
	require.Less(t, early.TransactionID, got[1].TxID)

	require.NoError(t, holder.Rollback(ctx))
	// With nothing open, the cursor moves past every event (at the next
	// heartbeat write).
	require.Eventually(t, func() bool {
		c, _ := checkpoint(t, store, "p")
		return cursor.Compare(c.TransactionID, c.Position, got[1].TxID, late[0]) >= 0
	}, deadline, 20*time.Millisecond, "read model %v", got)
}

// TestSwitchToLogicalContinuesAfterCursor: a projection that ran with tail
// reads and is switched to logical decoding continues after its stored
// cursor (the initial snapshot read starts there): each event once.
func TestSwitchToLogicalContinuesAfterCursor(t *testing.T) {
	store, _ := newStore(t)
	h, rows := readModel(t, store)
	want := appendN(t, store, 3)
	tailCfg := projConfig()
	tailCfg.Logical = nil
	stop := startRunner(t, store, "p", h, tailCfg)
	waitRows(t, rows, 3)
	require.Eventually(t, func() bool {
		c, _ := checkpoint(t, store, "p")
		return c.Position >= want[2]
	}, deadline, 20*time.Millisecond)
	stop()

	want = append(want, appendN(t, store, 2)...)
	startRunner(t, store, "p", h, projConfig())
	waitRows(t, rows, 5)
	want = append(want, appendN(t, store, 1)...)
	got := waitRows(t, rows, 6)
	require.Equal(t, want, positions(got))
}

// TestResumeInsideATransaction: a transaction larger than a batch is split;
// a reader reopened from the checkpoint after the first part delivers the
// rest, exactly once, and then only new events.
func TestResumeInsideATransaction(t *testing.T) {
	store, _ := newStore(t)
	ctx := t.Context()
	useSlot(store, "r")
	q := query.All()
	rd, err := logical.Open(ctx, store, "r", q, logical.Checkpoint{}, cursor.Start, nil)
	require.NoError(t, err)
	// The initial read of an empty log.
	b, err := rd.Next(ctx, 10, 10*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, b.Events)
	require.Nil(t, b.Checkpoint.Sync)

	want := appendN(t, store, 10)
	var got []int64
	b = nextEvents(t, rd, 3)
	got = append(got, evPositions(b.Events)...)
	require.Len(t, got, 3)
	require.EqualValues(t, 3, b.Checkpoint.Skip)
	cp, tail := b.Checkpoint, b.Tail
	require.NoError(t, rd.Close(ctx))

	// Parse what would be stored.
	cp, err = logical.ParseCheckpoint(cp.String())
	require.NoError(t, err)
	rd, err = logical.Open(ctx, store, "r", q, cp, tail, nil)
	require.NoError(t, err)
	defer rd.Close(context.Background())
	for len(got) < 10 {
		b = nextEvents(t, rd, 4)
		got = append(got, evPositions(b.Events)...)
	}
	require.Equal(t, want, got)
	require.NoError(t, rd.Confirm(ctx, b.Checkpoint))
	cp = b.Checkpoint
	require.NoError(t, rd.Close(ctx))

	// From the end of that transaction: nothing again, then the next one.
	rd, err = logical.Open(ctx, store, "r", q, cp, tail, nil)
	require.NoError(t, err)
	defer rd.Close(context.Background())
	more := appendN(t, store, 2)
	b = nextEvents(t, rd, 10)
	require.Equal(t, more, evPositions(b.Events))
}

func nextEvents(t *testing.T, rd *logical.Reader, max int) logical.Batch {
	t.Helper()
	var b logical.Batch
	await.True(t, deadline, "events handed out", func() bool {
		var err error
		b, err = rd.Next(t.Context(), max, 100*time.Millisecond)
		require.NoError(t, err)
		return len(b.Events) > 0
	})
	return b
}

func evPositions(evs []pgdcb.StoredEvent) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Position
	}
	return out
}

// TestDecodedEventsEqualReadTail: the stream decodes every field as a read
// returns it.
func TestDecodedEventsEqualReadTail(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  *logical.Config
	}{{"stream", nil}, {"catch-up", catchUpCfg()}} {
		t.Run(c.name, func(t *testing.T) {
			store, _ := newStore(t)
			ctx := t.Context()
			useSlot(store, "r")
			rd, err := logical.Open(ctx, store, "r", query.All(), logical.Checkpoint{}, cursor.Start, c.cfg)
			require.NoError(t, err)
			defer rd.Close(context.Background())
			_, err = rd.Next(ctx, 10, 10*time.Millisecond)
			require.NoError(t, err)
			ev := event(t, "Typed", "a=1", "b=x y", `c={"q"}`)
			ev.Metadata = []byte(`{"corr": "x", "n": [1, 2.50]}`)
			ev.ID = [16]byte{1, 2, 3}
			_, err = store.Append(ctx, []pgdcb.Event{ev, event(t, "Other", "a=2")})
			require.NoError(t, err)
			var got []pgdcb.StoredEvent
			for len(got) < 2 {
				got = append(got, nextEvents(t, rd, 10).Events...)
			}
			require.Equal(t, c.cfg != nil, logical.CatchingUp(rd))
			tb, err := store.ReadTail(ctx, query.All(), cursor.Start, 0)
			require.NoError(t, err)
			require.Len(t, tb.Events, 2)
			for i := range got {
				require.True(t, got[i].OccurredAt.Equal(tb.Events[i].OccurredAt))
				got[i].OccurredAt = tb.Events[i].OccurredAt
				require.Equal(t, tb.Events[i], got[i])
			}
		})
	}
}

// TestResetDropsTheSlot: Reset of a stopped logical projection drops its
// slot (it would retain WAL); the next run rebuilds the read model from a
// new slot, exactly once.
func TestResetDropsTheSlot(t *testing.T) {
	store, pool := newStore(t)
	h, rows := readModel(t, store)
	want := appendN(t, store, 5)
	stop := startRunner(t, store, "p", h, projConfig())
	waitRows(t, rows, 5)
	stop()
	slot := logical.SlotName(store.Schema(), "p")
	st, err := logical.GetSlotStatus(t.Context(), pool, slot)
	require.NoError(t, err)
	require.True(t, st.Exists)

	quoted := pgx.Identifier{store.Schema()}.Sanitize()
	require.NoError(t, projection.Reset(t.Context(), store, "p", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM `+quoted+`.rm`)
		return err
	}))
	st, err = logical.GetSlotStatus(t.Context(), pool, slot)
	require.NoError(t, err)
	require.False(t, st.Exists, "Reset left the slot")

	want = append(want, appendN(t, store, 2)...)
	startRunner(t, store, "p", h, projConfig())
	got := waitRows(t, rows, 7)
	require.Equal(t, want, positions(got))
}

// TestSlotGoneWithoutDoneIsNeverSkipped: a checkpoint whose slot was
// dropped and that names no consumed set (stored while a backlog was in
// flight) stops the reader with ErrSlotLost; nothing is delivered.
func TestSlotGoneWithoutDoneIsNeverSkipped(t *testing.T) {
	store, pool := newStore(t)
	h, rows := readModel(t, store)
	appendN(t, store, 2)
	stop := startRunner(t, store, "p", h, projConfig())
	waitRows(t, rows, 2)
	stop()
	dropSlot(t, pool, logical.SlotName(store.Schema(), "p"))
	appendN(t, store, 3)

	_, text := checkpoint(t, store, "p")
	cp, err := logical.ParseCheckpoint(text)
	require.NoError(t, err)
	cp.Done = nil
	_, err = pool.Exec(t.Context(), `UPDATE `+pgx.Identifier{store.Schema()}.Sanitize()+`.checkpoints SET logical_checkpoint = $2 WHERE name = $1`, "p", cp.String())
	require.NoError(t, err)
	_, err = logical.Open(t.Context(), store, "p", query.All(), cp, cursor.Start, nil)
	require.ErrorIs(t, err, logical.ErrSlotLost)
	var lost *logical.SlotLostError
	require.True(t, errors.As(err, &lost))
	require.Equal(t, logical.SlotName(store.Schema(), "p"), lost.Slot)

	startRunner(t, store, "p", h, projConfig())
	require.Eventually(t, func() bool {
		st, err := projection.GetStatus(t.Context(), store, "p")
		require.NoError(t, err)
		return st.ErrorCount > 0 && strings.Contains(st.LastError, "slot") && strings.Contains(st.LastError, "lost")
	}, deadline, 20*time.Millisecond)
	require.Len(t, rows(), 2, "nothing delivered past the lost slot")
}

// TestSlotDroppedResynchronisesExactlyOnce: a projection whose slot an
// operator dropped while it was stopped resynchronises from the log: every
// event once, none skipped (a transaction that committed while the slot was
// gone, one that was open when the reader stopped), none repeated (events
// the stream delivered beyond the stored log-order cursor, held below a
// transaction of the same database that stayed open).
func TestSlotDroppedResynchronisesExactlyOnce(t *testing.T) {
	testSlotLostResynchronises(t, projectionMode, func(t *testing.T, store *eventstore.Store, pool *pgxpool.Pool) []int64 {
		dropSlot(t, pool, logical.SlotName(store.Schema(), "p"))
		return nil
	})
}

// TestSlotRecreatedResynchronisesExactlyOnce: the same when the slot was
// dropped and created anew under its name (by an operator, or by a
// resynchronisation whose first batch was not stored): the new slot is
// confirmed beyond the stored checkpoint, and streaming from it would skip.
func TestSlotRecreatedResynchronisesExactlyOnce(t *testing.T) {
	testSlotLostResynchronises(t, projectionMode, func(t *testing.T, store *eventstore.Store, pool *pgxpool.Pool) []int64 {
		slot := logical.SlotName(store.Schema(), "p")
		dropSlot(t, pool, slot)
		appended := appendN(t, store, 2)
		_, err := pool.Exec(t.Context(), `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
		require.NoError(t, err)
		return appended
	})
}

// TestSlotInvalidatedResynchronisesExactlyOnce: the same when the server
// invalidated the slot (max_slot_wal_keep_size; wal_status 'lost'), with the
// events appended meanwhile.
func TestSlotInvalidatedResynchronisesExactlyOnce(t *testing.T) {
	testSlotLostResynchronises(t, projectionMode, func(t *testing.T, store *eventstore.Store, pool *pgxpool.Pool) []int64 {
		return invalidate(t, store, pool, logical.SlotName(store.Schema(), "p"))
	})
}

// invalidate makes the server invalidate slot (a small max_slot_wal_keep_size
// on the package's own cluster, WAL switches and checkpoints) and returns the
// positions of the events it appended meanwhile.
func invalidate(t *testing.T, store *eventstore.Store, pool *pgxpool.Pool, slot string) []int64 {
	ctx := t.Context()
	exec := func(sql string) {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	exec(`ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`) // the package's own throwaway cluster
	exec(`SELECT pg_reload_conf()`)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `ALTER SYSTEM RESET max_slot_wal_keep_size`)
		_, _ = pool.Exec(context.Background(), `SELECT pg_reload_conf()`)
	})
	var appended []int64
	require.Eventually(t, func() bool {
		appended = append(appended, appendN(t, store, 1)...)
		exec(`SELECT pg_switch_wal()`)
		exec(`CHECKPOINT`)
		st, err := logical.GetSlotStatus(ctx, pool, slot)
		require.NoError(t, err)
		return st.WALStatus == "lost"
	}, deadline, 10*time.Millisecond)
	exec(`ALTER SYSTEM RESET max_slot_wal_keep_size`)
	exec(`SELECT pg_reload_conf()`)
	return appended
}

// readerMode runs a logical reader of name "p" over a read model's handler
// (a projection, or a subscription storing its checkpoint with the read
// model) and reads its stored cursor and checkpoint text.
type readerMode struct {
	start      func(t *testing.T, store *eventstore.Store, h projection.Handler) (stop func())
	checkpoint func(t *testing.T, store *eventstore.Store) (cursor.Cursor, string)
}

var projectionMode = readerMode{
	start: func(t *testing.T, store *eventstore.Store, h projection.Handler) func() {
		return startRunner(t, store, "p", h, projConfig())
	},
	checkpoint: func(t *testing.T, store *eventstore.Store) (cursor.Cursor, string) { return checkpoint(t, store, "p") },
}

func testSlotLostResynchronises(t *testing.T, mode readerMode, lose func(*testing.T, *eventstore.Store, *pgxpool.Pool) []int64) {
	store, pool := newStore(t)
	ctx := t.Context()
	h, rows := readModel(t, store)
	want := appendN(t, store, 2)
	stop := mode.start(t, store, h)
	waitRows(t, rows, 2)

	// A transaction of the same database holds the log-order cursor below
	// it; an appender's transaction stays open past the stop.
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(context.Background())
	_, err = holder.Exec(ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)
	appender, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer appender.Rollback(context.Background())
	open, err := store.AppendTx(ctx, appender, []pgdcb.Event{event(t, "E", "k=open")})
	require.NoError(t, err)
	var evs []pgdcb.Event
	for range 3 {
		evs = append(evs, event(t, "E", "k=ahead"))
	}
	ahead, err := store.Append(ctx, evs)
	require.NoError(t, err)
	want = append(want, ahead.Positions...)
	waitRows(t, rows, len(want))
	// Stored: a checkpoint naming what was consumed, and a cursor that the
	// delivered events are beyond (a tail read from it would repeat them).
	require.Eventually(t, func() bool {
		c, text := mode.checkpoint(t, store)
		cp, err := logical.ParseCheckpoint(text)
		require.NoError(t, err)
		return cp.Done != nil && cp.Done.Has(ahead.TransactionID, ahead.Positions[2]) &&
			cursor.Compare(c.TransactionID, c.Position, open.TransactionID, open.Positions[0]) < 0
	}, deadline, 20*time.Millisecond)
	stop()

	require.NoError(t, appender.Commit(ctx))
	require.NoError(t, holder.Rollback(ctx))
	want = append(want, open.Positions...)
	want = append(want, lose(t, store, pool)...)
	want = append(want, appendN(t, store, 2)...)

	mode.start(t, store, h)
	waitRows(t, rows, len(want))
	want = append(want, appendN(t, store, 2)...)
	got := waitRows(t, rows, len(want))
	require.Equal(t, want, positions(got))
	// Nothing more comes: the checkpoint passes the last event, and the read
	// model still has each event once.
	last := got[len(got)-1]
	require.Eventually(t, func() bool {
		c, _ := mode.checkpoint(t, store)
		return cursor.Compare(c.TransactionID, c.Position, last.TxID, last.Position) >= 0
	}, deadline, 20*time.Millisecond)
	require.Equal(t, want, positions(rows()))
}

func TestCheckpointText(t *testing.T) {
	cps := []logical.Checkpoint{
		{},
		{LSN: 0x16B3748, Skip: 0},
		{LSN: 0x1_0000_0010, Skip: 7},
		{LSN: 5, Sync: &logical.Sync{Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{11, 15}}, After: cursor.Cursor{TransactionID: 9, Position: 4}}},
		{LSN: 6, Skip: 2, Done: &logical.Done{Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{11}}, XIDs: []uint64{11, 21, 30}, PartXID: 31, PartPos: 7}},
		{LSN: 6, Done: &logical.Done{Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 10}}},
		{LSN: 5, Sync: &logical.Sync{Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 20}, After: cursor.Cursor{TransactionID: 9, Position: 4}},
			Done: &logical.Done{Snapshot: &cursor.Snapshot{Xmin: 3, Xmax: 9, Xip: []uint64{4}}, XIDs: []uint64{4}}},
		{LSN: 6, Skip: 2, Done: &logical.Done{Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{11}}, XIDs: []uint64{11, 21}, PartXID: 31, PartPos: 7}},
		{LSN: 6, Skip: 2, Done: &logical.Done{Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{12}}, XIDs: []uint64{11, 21, 30}, PartXID: 31, PartPos: 7}},
		{LSN: 6, Skip: 2, Done: &logical.Done{Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{11}}, XIDs: []uint64{11, 21, 30}, PartXID: 31, PartPos: 8}},
		{LSN: 5, Sync: &logical.Sync{Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{11, 15}}, After: cursor.Cursor{TransactionID: 9, Position: 5}}},
	}
	for _, cp := range cps {
		got, err := logical.ParseCheckpoint(cp.String())
		require.NoError(t, err)
		require.True(t, got.Equal(cp), "%s != %s", got, cp)
	}
	// Equal compares what String renders.
	for _, a := range cps {
		for _, b := range cps {
			require.Equal(t, a.String() == b.String(), a.Equal(b), "%s vs %s", a, b)
		}
	}
	for _, bad := range []string{"x", "0/1", "0/1|-1", "0/1|a", "0/1|0|1:2:|3", "zz|0", "0/1|0|2:1:|0|0",
		"0/1|0|1:2:", "0/1|0|1:2:;3,2;", "0/1|0|1:2:;;0/3", "0/1|0|1:2:;;5", "0/1|0|1:2:;x;"} {
		_, err := logical.ParseCheckpoint(bad)
		require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, bad)
	}
}

// TestPauseAndHandlerFailureResumeExactlyOnce: events read from the stream
// by a batch that is not committed (the projection was paused, or the
// handler failed) are read again from the stored checkpoint: each event is
// handled once.
func TestPauseAndHandlerFailureResumeExactlyOnce(t *testing.T) {
	store, _ := newStore(t)
	h, rows := readModel(t, store)
	want := appendN(t, store, 2)
	fail := make(chan struct{}, 1)
	flaky := func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		select {
		case <-fail:
			return errors.New("handler failed on purpose")
		default:
		}
		return h(ctx, tx, evs)
	}
	startRunner(t, store, "p", flaky, projConfig())
	waitRows(t, rows, 2)

	fail <- struct{}{}
	want = append(want, appendN(t, store, 3)...)
	got := waitRows(t, rows, 5)
	require.Equal(t, want, positions(got))
	st, err := projection.GetStatus(t.Context(), store, "p")
	require.NoError(t, err)
	require.Contains(t, st.LastError, "on purpose")

	require.NoError(t, projection.Pause(t.Context(), store, "p"))
	more := appendN(t, store, 4)
	// Paused: a batch that read them rolls back (observable: the status
	// stays PAUSED and the read model does not move while the events are
	// committed).
	require.Never(t, func() bool { return len(rows()) > 5 }, 500*time.Millisecond, 20*time.Millisecond)
	require.NoError(t, projection.Resume(t.Context(), store, "p"))
	want = append(want, more...)
	got = waitRows(t, rows, 9)
	require.Equal(t, want, positions(got))
}

// TestProjectionSlotMetricWhileEventsFlow: a logical projection reports its
// slot's retained WAL while every batch moves its checkpoint (no heartbeat
// write is then due, and the metric used to come only with one).
func TestProjectionSlotMetricWhileEventsFlow(t *testing.T) {
	store, _ := newStore(t)
	slots := &slotSeen{}
	cfg := projConfig()
	cfg.Tracer = slots
	handled := make(chan struct{}, 1)
	startRunner(t, store, "p", func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error {
		select {
		case handled <- struct{}{}:
		default:
		}
		return nil
	}, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	appending := make(chan struct{})
	go func() { // the next event once the runner has handled one: events flow at the reader's pace
		defer close(appending)
		for ctx.Err() == nil {
			_, _ = store.Append(ctx, []pgdcb.Event{event(t, "E", "k=v")})
			select {
			case <-handled:
			case <-ctx.Done():
			}
		}
	}()
	require.Eventually(t, func() bool { return slots.seen("p") }, deadline, 20*time.Millisecond)
	cancel()
	<-appending
}

// slotSeen is a subscription.StatusTracer recording the readers whose
// replication slot state it was given (what pgdcbprom.New shows
// as pgdcb_reader_slot_retained_wal_bytes).
type slotSeen struct{ names sync.Map }

func (*slotSeen) TraceBatchStart(ctx context.Context, _ subscription.TraceBatchData) context.Context {
	return ctx
}
func (*slotSeen) TraceBatchEnd(context.Context, subscription.TraceBatchData) {}
func (*slotSeen) TraceReaderError(context.Context, string, error)            {}
func (*slotSeen) TraceLag(context.Context, string, subscription.Lag)         {}
func (*slotSeen) TraceLeader(context.Context, string, bool)                  {}
func (*slotSeen) TraceFailed(context.Context, string, bool)                  {}
func (s *slotSeen) TraceSlot(_ context.Context, name string, _ subscription.SlotStatus) {
	s.names.Store(name, true)
}

func (s *slotSeen) seen(name string) bool { _, ok := s.names.Load(name); return ok }
