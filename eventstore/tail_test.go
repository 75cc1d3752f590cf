package eventstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

// tailChecked follows q from after in pages of limit until it has n events (or
// a minute passes), asserting at every page what a tailing reader relies on:
// the page's cursor covers the page, never moves back, and no event comes
// twice.
func tailChecked(t *testing.T, s *eventstore.Store, q query.Query, after cursor.Cursor, limit, n int) ([]pgdcb.StoredEvent, cursor.Cursor) {
	t.Helper()
	var got []pgdcb.StoredEvent
	seen := map[int64]bool{}
	await.Until(t, time.Minute, func() (bool, string) {
		for { // full pages are read on at once; a short one ends the poll
			b, err := s.ReadTail(context.Background(), q, after, limit)
			require.NoError(t, err)
			require.GreaterOrEqual(t, cursor.Compare(b.Cursor.TransactionID, b.Cursor.Position, after.TransactionID, after.Position), 0,
				"the cursor moved back from %v to %v", after, b.Cursor)
			for _, ev := range b.Events {
				require.False(t, seen[ev.Position], "event at position %d delivered twice", ev.Position)
				seen[ev.Position] = true
				require.GreaterOrEqual(t, cursor.Compare(b.Cursor.TransactionID, b.Cursor.Position, ev.TransactionID, ev.Position), 0,
					"the page's cursor %v does not cover its event (%d, %d)", b.Cursor, ev.TransactionID, ev.Position)
			}
			got = append(got, b.Events...)
			after = b.Cursor
			if len(b.Events) < limit {
				return len(got) >= n, fmt.Sprintf("tail at horizon %d (held by %+v) with %d of %d events", b.Horizon, b.HorizonHolder, len(got), n)
			}
		}
	})
	return got, after
}

// A page shorter than the limit still moves the cursor over the events it
// delivers, also when the next transaction id after the page's is still
// running (the horizon is right above it). Before the fix, the cursor stayed
// where the read started, and the next read delivered the same events again.
// The case needs the open transaction to take the very next id, which other
// tests on the server can get in the way of: rounds repeat until three had it.
func TestTailShortPageMovesCursor(t *testing.T) {
	ctx := context.Background()
	// No NOTIFY after the append: it would take the next transaction id.
	s, pool := newStore(t, &eventstore.Config{NotifyDisabled: true})
	effective := 0
	for round := 0; round < 200 && effective < 3; round++ {
		tag := fmt.Sprintf("round=r%d", round)
		q := query.Tagged(nil, tag)
		res, err := s.Append(ctx, []pgdcb.Event{
			pgdcb.MustEvent("E", 1, tag), pgdcb.MustEvent("E", 2, tag), pgdcb.MustEvent("E", 3, tag),
		})
		require.NoError(t, err)
		// The next transaction id, held open: the horizon stops right above
		// the append's transaction.
		open, err := pool.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, open.QueryRow(ctx, "SELECT pg_current_xact_id() IS NOT NULL").Scan(new(bool)))

		// Read in pages of 2 while the transaction is open: the second page
		// holds one event and must move the cursor over it.
		b1, err := s.ReadTail(ctx, q, cursor.Start, 2)
		require.NoError(t, err)
		if len(b1.Events) == 2 {
			b2, err := s.ReadTail(ctx, q, b1.Cursor, 2)
			require.NoError(t, err)
			require.Len(t, b2.Events, 1, "round %d", round)
			if b2.Horizon == res.TransactionID+1 {
				effective++
			}
			last := b2.Events[0]
			require.GreaterOrEqual(t, cursor.Compare(b2.Cursor.TransactionID, b2.Cursor.Position, last.TransactionID, last.Position), 0,
				"round %d: a short page's cursor %v must cover its event at (%d, %d), horizon %d", round, b2.Cursor, last.TransactionID, last.Position, b2.Horizon)
			b3, err := s.ReadTail(ctx, q, b2.Cursor, 2)
			require.NoError(t, err)
			require.Empty(t, b3.Events, "round %d: delivered again", round)
		}
		require.NoError(t, open.Rollback(ctx))
		got, _ := tailChecked(t, s, q, cursor.Start, 2, 3)
		require.Len(t, got, 3, "round %d", round)
	}
	require.Positive(t, effective, "no round had the horizon right above the append")
}

// A tailing cursor never points past the newest event below the horizon: the
// transaction ids between that event and the horizon may have written nothing
// durable (a NOTIFY, a rollback, an id taken by a read) and come back after a
// crash. Before the fix, the cursor moved to (horizon-1, MaxInt64).
func TestTailCursorStaysOnAnEvent(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t, &eventstore.Config{NotifyDisabled: true})
	q := query.Tagged(nil, "stream=s1")
	res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("E", 1, "stream=s1")})
	require.NoError(t, err)
	// Transactions that take an id and write no event, as a NOTIFY does.
	for range 3 {
		_, err := pool.Exec(ctx, "SELECT pg_current_xact_id()")
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, "SELECT pg_notify('pgdcb_test_channel', '')")
	require.NoError(t, err)

	got, cur := tailChecked(t, s, q, cursor.Start, 10, 1)
	require.Len(t, got, 1)
	// Poll until the horizon has passed the id-only transactions too, so the
	// old code would have moved the cursor onto them.
	await.Until(t, time.Minute, func() (bool, string) {
		b, err := s.ReadTail(ctx, q, cur, 10)
		require.NoError(t, err)
		require.Empty(t, b.Events)
		require.Equal(t, res.TransactionID, b.Cursor.TransactionID, "the cursor names the last event's transaction, not a later id (horizon %d)", b.Horizon)
		require.Equal(t, res.Positions[0], b.Cursor.Position)
		return b.Horizon > res.TransactionID+4, fmt.Sprintf("horizon held at %d by %+v", b.Horizon, b.HorizonHolder)
	})

	// An event of another query moves the cursor onto that event (it exists
	// and sorts after every delivered one), never beyond it.
	other, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("F", 1, "stream=s2")})
	require.NoError(t, err)
	await.Until(t, time.Minute, func() (bool, string) {
		b, err := s.ReadTail(ctx, q, cur, 10)
		require.NoError(t, err)
		require.Empty(t, b.Events)
		if b.Cursor.Position == other.Positions[0] {
			require.Equal(t, other.TransactionID, b.Cursor.TransactionID)
			return true, ""
		}
		require.Equal(t, res.Positions[0], b.Cursor.Position)
		return false, fmt.Sprintf("horizon held at %d by %+v", b.Horizon, b.HorizonHolder)
	})
}

// Head is the head of the whole log, also while the reader is behind: lag
// metrics are computed from it. Before the fix, a full page reported its own
// last event as the head, so lag read 0 during catch-up.
func TestTailHeadIsTheLogHeadWhileBehind(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, nil)
	batch := make([]pgdcb.Event, 100)
	for i := range batch {
		batch[i] = pgdcb.MustEvent("E", i, "stream=h")
	}
	res, err := s.Append(ctx, batch)
	require.NoError(t, err)
	await.Until(t, time.Minute, func() (bool, string) {
		b, err := s.ReadTail(ctx, query.All(), cursor.Start, 10)
		require.NoError(t, err)
		require.Equal(t, res.Positions[99], b.Head.Position, "Head is the log's last event")
		require.Equal(t, res.TransactionID, b.Head.TransactionID)
		if len(b.Events) == 10 {
			require.Equal(t, res.Positions[9], b.Cursor.Position)
			return true, ""
		}
		return false, fmt.Sprintf("horizon held at %d by %+v", b.Horizon, b.HorizonHolder)
	})
}

// Negative limits are refused with a typed error; 0 means no limit.
func TestTailAndReadRefuseNegativeLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	_, err := s.ReadTail(ctx, query.All(), cursor.Start, -5)
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.ErrorContains(t, err, "-5")
	_, _, err = s.ReadAll(ctx, query.All(), &pgdcb.ReadOptions{Limit: -1})
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.ErrorContains(t, err, "ReadOptions.Limit")
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("E", 1, "a=1")})
	require.NoError(t, err)
	evs, _, err := s.ReadAll(ctx, query.All(), &pgdcb.ReadOptions{Limit: 0})
	require.NoError(t, err)
	require.Len(t, evs, 1)
}
