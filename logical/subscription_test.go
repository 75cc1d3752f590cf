package logical_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// subscriptionMode runs subscription "p" in the logical decoding mode
// (RunLogical); its handler writes the read model and stores the batch's
// cursor and checkpoint in one transaction, and a start resumes from them.
var subscriptionMode = readerMode{
	start: func(t *testing.T, store *eventstore.Store, h projection.Handler) func() {
		t.Helper()
		useSlot(store, "p")
		quoted := pgx.Identifier{store.Schema()}.Sanitize()
		_, err := store.Pool().Exec(t.Context(), `CREATE TABLE IF NOT EXISTS `+quoted+`.sub_cp (name text PRIMARY KEY, tx xid8 NOT NULL, pos bigint NOT NULL, cp text NOT NULL)`)
		require.NoError(t, err)
		tail, text := subCheckpoint(t, store)
		from, err := logical.ParseCheckpoint(text)
		require.NoError(t, err)
		sub, err := subscription.New(store, query.All(), &subscription.Config{Name: "p", Logical: &logical.Config{},
			BatchSize: 100, PollInterval: 50 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- sub.RunLogical(ctx, from, tail, func(ctx context.Context, b subscription.Batch) error {
				return pgx.BeginTxFunc(ctx, store.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
					if len(b.Events) > 0 {
						if err := h(ctx, tx, b.Events); err != nil {
							return err
						}
					}
					_, err := tx.Exec(ctx, `INSERT INTO `+quoted+`.sub_cp VALUES ('p', $1::xid8, $2, $3)
						ON CONFLICT (name) DO UPDATE SET tx = excluded.tx, pos = excluded.pos, cp = excluded.cp`,
						b.Cursor.TransactionID, b.Cursor.Position, b.Checkpoint.String())
					return err
				})
			})
		}()
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			select {
			case err := <-done:
				require.ErrorIs(t, err, context.Canceled)
			case <-time.After(deadline):
				t.Fatal("subscription did not stop")
			}
		}
		t.Cleanup(stop)
		return stop
	},
	checkpoint: subCheckpoint,
}

// subCheckpoint reads what subscriptionMode's handler stored (the zero
// values before its first batch).
func subCheckpoint(t *testing.T, store *eventstore.Store) (cursor.Cursor, string) {
	t.Helper()
	var (
		c    cursor.Cursor
		text string
	)
	err := store.Pool().QueryRow(t.Context(), `SELECT tx, pos, cp FROM `+pgx.Identifier{store.Schema()}.Sanitize()+`.sub_cp WHERE name = 'p'`).
		Scan(&c.TransactionID, &c.Position, &text)
	if errors.Is(err, pgx.ErrNoRows) {
		return cursor.Start, ""
	}
	require.NoError(t, err)
	return c, text
}

// TestSubscriptionLogicalResumesExactlyOnce: a logical subscription
// delivers the events committed before its slot (initial read), then the
// stream; restarted from what its handler stored, it delivers the rest once.
func TestSubscriptionLogicalResumesExactlyOnce(t *testing.T) {
	store, _ := newStore(t)
	h, rows := readModel(t, store)
	want := appendN(t, store, 3)
	stop := subscriptionMode.start(t, store, h)
	waitRows(t, rows, 3)
	want = append(want, appendN(t, store, 250)...) // more than a batch
	waitRows(t, rows, len(want))
	stop()
	want = append(want, appendN(t, store, 4)...)
	subscriptionMode.start(t, store, h)
	got := waitRows(t, rows, len(want))
	require.Equal(t, want, positions(got))
}

// TestSubscriptionSlotDroppedResynchronisesExactlyOnce: the lost-slot test
// of projections (a same-database transaction open while events are
// delivered past the cursor, a transaction open across the stop) with a
// subscription that stores its own checkpoint.
func TestSubscriptionSlotDroppedResynchronisesExactlyOnce(t *testing.T) {
	testSlotLostResynchronises(t, subscriptionMode, func(t *testing.T, store *eventstore.Store, pool *pgxpool.Pool) []int64 {
		dropSlot(t, pool, logical.SlotName(store.Schema(), "p"))
		return nil
	})
}

// TestSubscriptionLogicalModeIsExplicit: Run refuses a Config.Logical, and
// RunLogical needs one.
func TestSubscriptionLogicalModeIsExplicit(t *testing.T) {
	store, _ := newStore(t)
	h := func(context.Context, subscription.Batch) error { return nil }
	sub, err := subscription.New(store, query.All(), &subscription.Config{Logical: &logical.Config{}})
	require.NoError(t, err)
	require.ErrorIs(t, sub.Run(t.Context(), cursor.Start, h), pgdcb.ErrInvalidArgument)
	sub, err = subscription.New(store, query.All(), nil)
	require.NoError(t, err)
	require.ErrorIs(t, sub.RunLogical(t.Context(), logical.Checkpoint{}, cursor.Start, h), pgdcb.ErrInvalidArgument)
	_, err = subscription.New(store, query.All(), &subscription.Config{Logical: &logical.Config{Slot: "Bad-Name"}})
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
}

// TestSubscriptionLogicalSlotMetric: a logical subscription with
// Config.Tracer (a StatusTracer) gets its slot's retained WAL.
func TestSubscriptionLogicalSlotMetric(t *testing.T) {
	store, _ := newStore(t)
	useSlot(store, "m")
	slots := &slotSeen{}
	sub, err := subscription.New(store, query.All(), &subscription.Config{Name: "m", Logical: &logical.Config{},
		PollInterval: 50 * time.Millisecond, Tracer: slots})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sub.RunLogical(ctx, logical.Checkpoint{}, cursor.Start, func(context.Context, subscription.Batch) error { return nil })
	}()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	appendN(t, store, 1)
	require.Eventually(t, func() bool { return slots.seen("m") }, deadline, 20*time.Millisecond)
}

// TestSubscriptionSwitchesModesExactlyOnce: a subscription switched
// RunLogical → Run → RunLogical by the rule of docs/SUBSCRIPTIONS.md
// ("Cost and limits of the mode"): Run's handler keeps the last logical
// checkpoint's Detached() and skips what it names as Consumed (events
// delivered beyond the cursor while a same-database transaction held it);
// RunLogical given it starts over after Run's cursor. Each event once, in
// order.
func TestSubscriptionSwitchesModesExactlyOnce(t *testing.T) {
	store, pool := newStore(t)
	h, rows := readModel(t, store)
	quoted := pgx.Identifier{store.Schema()}.Sanitize()
	want := appendN(t, store, 1)
	stop := subscriptionMode.start(t, store, h)
	waitRows(t, rows, 1) // the slot exists
	holder, _ := holdXact(t, pool)
	for range 3 {
		want = append(want, appendN(t, store, 2)...)
	}
	waitRows(t, rows, 7)
	stop()
	require.NoError(t, holder.Rollback(t.Context()))

	// Run, by the rule.
	from, text := subCheckpoint(t, store)
	last, err := logical.ParseCheckpoint(text)
	require.NoError(t, err)
	last, err = last.Detached()
	require.NoError(t, err)
	require.True(t, last.IsDetached(), "events were delivered beyond the cursor")
	sub, err := subscription.New(store, query.All(), &subscription.Config{Name: "p", BatchSize: 100,
		PollInterval: 50 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, from, func(ctx context.Context, b subscription.Batch) error {
			return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
				var evs []pgdcb.StoredEvent
				for _, ev := range b.Events {
					if !last.Consumed(ev.TransactionID, ev.Position) {
						evs = append(evs, ev)
					}
				}
				if len(evs) > 0 {
					if err := h(ctx, tx, evs); err != nil {
						return err
					}
				}
				keep := ""
				if last.Done.Beyond(b.Cursor) {
					keep = last.String()
				}
				_, err := tx.Exec(ctx, `UPDATE `+quoted+`.sub_cp SET tx = $1::xid8, pos = $2, cp = $3 WHERE name = 'p'`,
					b.Cursor.TransactionID, b.Cursor.Position, keep)
				return err
			})
		})
	}()
	want = append(want, appendN(t, store, 2)...)
	waitRows(t, rows, 9)
	res := appendRes(t, store, 1)
	want = append(want, res.Positions...)
	require.NoError(t, sub.WaitFor(t.Context(), res.Cursor()))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	subscriptionMode.start(t, store, h)
	want = append(want, appendN(t, store, 2)...)
	waitRows(t, rows, 12)
	res = appendRes(t, store, 1)
	want = append(want, res.Positions...)
	got := waitRows(t, rows, len(want))
	require.Equal(t, want, positions(got), "each event once, in order")
}
