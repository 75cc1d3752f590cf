package wallet_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/query"
)

// The read model, fed while commands run and with several runners, ends equal
// to the replay of the log.
func TestBalancesReadModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	b := wallet.NewBalances(svc.Store(), &wallet.BalancesConfig{BatchSize: 7})
	require.NoError(t, b.Setup(ctx))
	require.NoError(t, b.Setup(ctx)) // idempotent
	const n = 6
	for i := range n {
		id := fmt.Sprint("w", i)
		_, err := svc.Open(ctx, id, nil)
		require.NoError(t, err)
		_, err = svc.Deposit(ctx, id, 100, nil)
		require.NoError(t, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var runners sync.WaitGroup
	for range 2 {
		runners.Go(func() { require.NoError(t, b.Run(runCtx)) })
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 15 {
				_, _ = svc.Transfer(ctx, fmt.Sprint("w", (w+i)%n), fmt.Sprint("w", (w+i+1)%n), int64(1+i), nil)
			}
		})
	}
	wg.Wait()
	last, _, err := svc.Store().ReadLast(ctx, query.All())
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, b.WaitFor(wctx, cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}))
	stop()
	runners.Wait()
	want := replay(t, svc)
	for i := range n {
		id := fmt.Sprint("w", i)
		got, ok, err := b.Balance(ctx, id)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want[id], got, id)
	}
	_, ok, err := b.Balance(ctx, "ghost")
	require.NoError(t, err)
	require.False(t, ok)
	cp, err := b.Checkpoint(ctx)
	require.NoError(t, err)
	require.False(t, cp.IsStart())
}
