package eventstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

// ImportTx keeps each event's recorded time, id and metadata, in order,
// across several calls of one transaction (one target transaction); a
// zero time is stamped by the server.
func TestImportTxKeepsTimeIDsAndGrouping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	t0 := time.Date(2019, 3, 4, 5, 6, 7, 123456000, time.UTC)
	id := uuid.New()
	ev := func(typ string, at time.Time) pgdcb.StoredEvent {
		return pgdcb.StoredEvent{Event: pgdcb.MustEvent(typ, map[string]string{"t": typ}, "k=v"), OccurredAt: at, Position: 99, TransactionID: 42}
	}
	first := ev("A", t0)
	first.ID = id
	first.Metadata = json.RawMessage(`{"correlation_id": "c1"}`)
	var r1, r2 pgdcb.AppendResult
	before := time.Now()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		if r1, err = s.ImportTx(ctx, tx, []pgdcb.StoredEvent{first, ev("B", t0.Add(time.Second))}); err != nil {
			return err
		}
		r2, err = s.ImportTx(ctx, tx, []pgdcb.StoredEvent{ev("C", time.Time{})})
		return err
	}))
	require.Equal(t, r1.TransactionID, r2.TransactionID, "one transaction")
	require.Equal(t, t0.Add(time.Second), r1.OccurredAt.UTC())
	require.False(t, r2.OccurredAt.Before(before.Truncate(time.Second)), "a zero time is the server's now")

	got, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []string{"A", "B", "C"}, []string{got[0].Type, got[1].Type, got[2].Type})
	require.Equal(t, t0, got[0].OccurredAt.UTC())
	require.Equal(t, id, got[0].ID)
	require.JSONEq(t, `{"correlation_id": "c1"}`, string(got[0].Metadata))
	require.Equal(t, r2.OccurredAt, got[2].OccurredAt)
	require.NotEqual(t, int64(99), got[0].Position, "positions are the log's")
	for _, e := range got {
		require.Equal(t, r1.TransactionID, e.TransactionID)
	}
	require.Equal(t, got[2].Position, r2.Cursor().Position)

	// An id already stored: ErrIdempotent, nothing written.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = s.ImportTx(ctx, tx, []pgdcb.StoredEvent{ev("D", t0), first})
	require.ErrorIs(t, err, pgdcb.ErrIdempotent)
	require.NoError(t, tx.Rollback(ctx))

	// Not the transaction's first write: refused, as for AppendTx.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	_, err = s.ImportTx(ctx, tx, []pgdcb.StoredEvent{ev("E", t0)})
	require.ErrorIs(t, err, pgdcb.ErrTransactionState)
	require.NoError(t, tx.Rollback(ctx))

	// Invalid events are refused before anything is sent.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = s.ImportTx(ctx, tx, []pgdcb.StoredEvent{{Event: pgdcb.Event{Type: "", Data: json.RawMessage(`{}`)}}})
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
	require.NoError(t, tx.Rollback(ctx))

	n, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Len(t, n, 3)
}

// A conditional append whose decision ran before an import's transaction
// committed fails on the imported event: the import holds the global key
// exclusively, so the check waits for it and then sees it.
func TestImportTxIsSeenByAConcurrentCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	cond, err := s.Project(ctx, pgdcb.NewModel(query.Tagged(nil, "course=c1"), 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 }))
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = s.ImportTx(ctx, tx, []pgdcb.StoredEvent{{Event: pgdcb.MustEvent("Subscribed", nil, "course=c1"), OccurredAt: time.Now().Add(-time.Hour)}})
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=b")}, cond)
		done <- err
	}()
	// The append waits for the import's key; the verdict comes after the commit.
	await.True(t, 10*time.Second, "the append waits for the import's transaction", func() bool {
		return keyWaiters(t, s, pool, "append_") == 1
	})
	require.NoError(t, tx.Commit(ctx))
	err = <-done
	var cf *appendif.ConditionFailedError
	require.ErrorAs(t, err, &cf)
}

// ImportTx seals nothing: it refuses an event carrying a personal-field
// marker (stored in clear, Erase could not forget it), naming the event,
// and writes none of the batch; a value already sealed is imported as
// stored.
func TestImportTxRefusesPersonalMarkers(t *testing.T) {
	ctx := context.Background()
	s, pool := erasableStore(t, nil)
	marker := fmt.Sprintf("Grace-Hopper-%d", time.Now().UnixNano())
	plain := pgdcb.MustEvent("Deposited", map[string]any{"amount": 5}, "wallet=w9")
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = s.ImportTx(ctx, tx, []pgdcb.StoredEvent{{Event: plain}, {Event: walletOpened("w9", "u9", marker, "u8", "x")}})
	var ie *pgdcb.InvalidEventError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, 1, ie.Index)
	require.Equal(t, "data", ie.Field)
	require.Contains(t, ie.Reason, "pgdcb.Personal")
	require.NoError(t, tx.Rollback(ctx))
	require.Zero(t, hits(t, pool, s.Schema(), marker), "nothing written")

	// A sealed value (as an export holds it) passes through.
	_, err = s.Append(ctx, []pgdcb.Event{walletOpened("w1", "u1", marker, "u2", "x")})
	require.NoError(t, err)
	stored, err := pool.Query(ctx, `SELECT data FROM `+s.Schema()+`.events WHERE type = 'WalletOpened'`)
	require.NoError(t, err)
	datas, err := pgx.CollectRows(stored, pgx.RowTo[[]byte])
	require.NoError(t, err)
	require.Len(t, datas, 1)
	sealed := walletOpened("w2", "u1", "", "u2", "x")
	sealed.Data = datas[0]
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = s.ImportTx(ctx, tx, []pgdcb.StoredEvent{{Event: sealed}})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}
