package effects_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
)

// A transaction of the store's own database that holds a transaction id older
// than the request, open for the whole test, does not stall effects: the
// effect is claimed, run and recorded as completed while it is open. Workers
// follow the effect events with decision reads after their cursor
// (Worker.catchUp), and claim and record with AppendIf, none of which waits
// for the tailing horizon; the transaction holds no lock key of the effect.
// The control: a tailing read of the same store sees none of the effect's
// events while the transaction is open. The store lives in a throwaway
// database, and the transaction in the same one.
func TestWorkerIsNotHeldBySameDatabaseTransaction(t *testing.T) {
	pool, dsn := pgtest.PoolOnOtherDatabase(t)
	s := teststore.OnPool(t, pool, nil)
	q := newQueue(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	held := pgtest.HoldXID(t, dsn)
	id := requestJob(t, q, "s", "k", nil)
	ran := make(chan string, 1)
	w, err := effects.NewWorker(s, &effects.Config{PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"job": func(_ context.Context, e effects.Effect) error {
			select {
			case ran <- e.ID:
			default:
			}
			return nil
		}}})
	require.NoError(t, err)
	stop := startWorkers(t, w)
	select {
	case got := <-ran:
		require.Equal(t, id, got)
	case <-ctx.Done():
		t.Fatal("the effect did not run while a transaction of the same database was open")
	}
	waitCounts(t, q, 1, 0, time.Minute)
	stop()
	require.Equal(t, int64(1), w.Stats().Executed)

	running, err := held.Running(ctx)
	require.NoError(t, err)
	require.True(t, running, "the transaction was still open when the effect completed")
	tail, err := s.ReadTail(ctx, query.All(), cursor.Start, 100)
	require.NoError(t, err)
	require.Empty(t, tail.Events, "control: the open transaction holds a tailing reader")
}
