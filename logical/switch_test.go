package logical_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// waitCursor waits until the projection's stored cursor is at or after c.
func waitCursor(t *testing.T, store *eventstore.Store, name string, c cursor.Cursor) {
	t.Helper()
	require.Eventually(t, func() bool {
		at, _ := checkpoint(t, store, name)
		return cursor.Compare(at.TransactionID, at.Position, c.TransactionID, c.Position) >= 0
	}, deadline, 20*time.Millisecond, "cursor reaches %s", c)
}

// TestSwitchLogicalTailLogicalExactlyOnce is issue 36's reproduction: a
// projection runs in logical mode (10 events), with tail reads (10 more),
// then in logical mode again (10 more): 30 events, each handled once, in
// order. Before, the tail batches moved the cursor but left the logical
// checkpoint (and the slot) where they were, and the second logical period
// resumed from there: it handled the tail period's 10 events again.
func TestSwitchLogicalTailLogicalExactlyOnce(t *testing.T) {
	store, _ := newStore(t)
	h, rows := readModel(t, store)
	tailCfg := projConfig()
	tailCfg.Logical = nil

	var want []int64
	stop := startRunner(t, store, "p", h, projConfig())
	for range 5 {
		want = append(want, appendN(t, store, 2)...)
	}
	waitRows(t, rows, 10)
	waitCursor(t, store, "p", cursor.Cursor{TransactionID: rows()[9].TxID, Position: want[9]})
	stop()

	stop = startRunner(t, store, "p", h, tailCfg)
	for range 5 {
		want = append(want, appendN(t, store, 2)...)
	}
	waitRows(t, rows, 20)
	stop()

	startRunner(t, store, "p", h, projConfig())
	for range 5 {
		want = append(want, appendN(t, store, 2)...)
	}
	waitRows(t, rows, 30)
	res := appendRes(t, store, 1) // a marker: everything before it is handled once it is
	want = append(want, res.Positions...)
	got := waitRows(t, rows, 31)
	require.Equal(t, want, positions(got), "each event once, in order")
}

// TestSwitchToTailSkipsWhatLogicalHandled: a logical projection delivers
// events past its cursor while a same-database transaction holds an xid
// (the cursor waits below it); switched to tail reads, the projection must
// not handle them again. Before, the tail reads resumed from the cursor and
// handled every one of them a second time.
func TestSwitchToTailSkipsWhatLogicalHandled(t *testing.T) {
	store, pool := newStore(t)
	h, rows := readModel(t, store)
	want := appendN(t, store, 1)
	stop := startRunner(t, store, "p", h, projConfig())
	waitRows(t, rows, 1) // the slot exists
	holder, _ := holdXact(t, pool)
	for range 3 {
		want = append(want, appendN(t, store, 2)...)
	}
	waitRows(t, rows, 7)
	stop()
	require.NoError(t, holder.Rollback(t.Context()))

	tailCfg := projConfig()
	tailCfg.Logical = nil
	startRunner(t, store, "p", h, tailCfg)
	want = append(want, appendN(t, store, 2)...)
	waitRows(t, rows, 9)
	res := appendRes(t, store, 1)
	want = append(want, res.Positions...)
	got := waitRows(t, rows, len(want))
	require.Equal(t, want, positions(got), "each event once, in order")

	// The slot of the logical period is dropped at the switch: it would
	// retain WAL for ever.
	require.Eventually(t, func() bool {
		st, err := logical.GetSlotStatus(t.Context(), pool, logical.SlotName(store.Schema(), "p"))
		require.NoError(t, err)
		return !st.Exists
	}, deadline, 20*time.Millisecond, "the abandoned slot is dropped")
}

// TestWaitForLogicalWithHeldTransaction: in logical mode, WaitFor returns
// once the event is handled, while a transaction of the same database
// holds an xid (the stored cursor stays below it). Before, WaitFor compared
// the cursor only and timed out.
func TestWaitForLogicalWithHeldTransaction(t *testing.T) {
	store, pool := newStore(t)
	h, rows := readModel(t, store)
	appendN(t, store, 1)
	useSlot(store, "p")
	r, err := projection.New(store, "p", query.All(), h, projConfig())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitRows(t, rows, 1) // the slot exists

	holder, holdXID := holdXact(t, pool)
	for i := range 3 {
		res := appendRes(t, store, 2)
		wctx, wcancel := context.WithTimeout(t.Context(), 15*time.Second)
		err := r.WaitFor(wctx, res.Cursor())
		wcancel()
		require.NoError(t, err, "append %d", i)
		got := rows()
		require.Equal(t, res.Positions[1], got[len(got)-1].Position, "the event is handled when WaitFor returns")
	}
	// The holder is still open: the cursor could not prove it.
	var still *uint64
	require.NoError(t, holder.QueryRow(t.Context(), `SELECT pg_current_xact_id_if_assigned()`).Scan(&still))
	require.NotNil(t, still)
	require.Equal(t, holdXID, *still)
	c, _ := checkpoint(t, store, "p")
	require.Less(t, c.TransactionID, holdXID)
}

// TestSwitchToTailDropsSlotWhileIdle: switched to tail reads with no event
// to read, the projection still detaches its logical checkpoint (or clears it) and drops
// the slot, which would otherwise retain WAL for as long as it runs.
func TestSwitchToTailDropsSlotWhileIdle(t *testing.T) {
	store, pool := newStore(t)
	h, rows := readModel(t, store)
	res := appendRes(t, store, 1)
	stop := startRunner(t, store, "p", h, projConfig())
	waitRows(t, rows, 1)
	waitCursor(t, store, "p", res.Cursor())
	stop()
	slot := logical.SlotName(store.Schema(), "p")
	st, err := logical.GetSlotStatus(t.Context(), pool, slot)
	require.NoError(t, err)
	require.True(t, st.Exists)

	tailCfg := projConfig()
	tailCfg.Logical = nil
	startRunner(t, store, "p", h, tailCfg)
	require.Eventually(t, func() bool {
		st, err := logical.GetSlotStatus(t.Context(), pool, slot)
		require.NoError(t, err)
		_, text := checkpoint(t, store, "p")
		cp, err := logical.ParseCheckpoint(text)
		require.NoError(t, err)
		return !st.Exists && (cp.IsZero() || cp.IsDetached())
	}, deadline, 20*time.Millisecond, "the slot is dropped and the logical checkpoint detached")
	require.Len(t, rows(), 1)
}
