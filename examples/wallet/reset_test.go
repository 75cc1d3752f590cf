package wallet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// runBalances starts the read model's projection until the test ends.
func runBalances(t *testing.T, b *wallet.Balances) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

// caughtUp waits until the read model holds the whole log.
func caughtUp(t *testing.T, svc *wallet.Service, b *wallet.Balances) {
	t.Helper()
	last, _, err := svc.Store().ReadLast(context.Background(), query.All())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.WaitFor(ctx, cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}))
}

// The bug of issue #38 §4: a reset from another tool than the application
// (`pgdcb projections reset`, an operator, a new deploy: projection.Reset
// without a clear function) moved only the checkpoint, and the running
// projection replayed the log on top of the balances: 43 became 86, for
// ever. The read model's tables are now recorded with its checkpoint, and
// every Reset empties them in its transaction.
func TestResetFromAnyToolDoesNotDoubleBalances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	b := wallet.NewBalances(svc.Store(), nil)
	require.NoError(t, b.Setup(ctx))
	_, err := svc.Open(ctx, "w1", nil)
	require.NoError(t, err)
	_, err = svc.Deposit(ctx, "w1", 43, nil)
	require.NoError(t, err)
	runBalances(t, b)
	caughtUp(t, svc, b)
	got, _, err := b.Balance(ctx, "w1")
	require.NoError(t, err)
	require.EqualValues(t, 43, got)

	require.NoError(t, projection.Reset(ctx, svc.Store(), b.Projection().Name(), nil))
	caughtUp(t, svc, b)
	got, _, err = b.Balance(ctx, "w1")
	require.NoError(t, err)
	require.EqualValues(t, 43, got, "the balance after a reset by another tool")
}
