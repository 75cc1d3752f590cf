package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/examples/wallet"
)

// seedWallets opens n wallets with balance each, by plain appends (fast setup).
func seedWallets(b *testing.B, st *eventstore.Store, prefix string, n int, balance int64) []string {
	ids := make([]string, n)
	var batch []pgdcb.Event
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%04d", prefix, i)
		batch = append(batch,
			pgdcb.MustEvent(wallet.WalletOpened, wallet.EventData{WalletID: ids[i]}, "wallet="+ids[i]),
			pgdcb.MustEvent(wallet.MoneyDeposited, wallet.EventData{WalletID: ids[i], Amount: balance, Balance: balance}, "wallet="+ids[i]))
		if len(batch) >= 900 || i == n-1 {
			_, err := st.Append(context.Background(), batch)
			require.NoError(b, err)
			batch = nil
		}
	}
	return ids
}

// BenchmarkTransfers: transfers/s at 1, 8 and 32 concurrent clients over 1,000
// uniformly random wallets and over a hot set of 10, with conflicts, retries and
// rejections per transfer. "baseline" is an unconditional Append of the same two
// events by one client, in the same run: compare ns/op against it.
//
//	go test -run '^$' -bench BenchmarkTransfers -benchtime 2000x ./examples/wallet/
func BenchmarkTransfers(b *testing.B) {
	ctx := context.Background()
	svc := newService(b)
	st := svc.Store()
	svc2, err := wallet.New(st, &wallet.Config{Commands: &commands.Config{MaxAttempts: 100}})
	require.NoError(b, err)
	uniform := seedWallets(b, st, "u", 1000, 1<<40)
	hot := seedWallets(b, st, "h", 10, 1<<40)

	b.Run("baseline-append-1", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			from, to := uniform[i%1000], uniform[(i+1)%1000]
			_, err := st.Append(ctx, []pgdcb.Event{
				pgdcb.MustEvent(wallet.TransferSent, wallet.EventData{WalletID: from, Amount: 0}, "wallet="+from),
				pgdcb.MustEvent(wallet.TransferReceived, wallet.EventData{WalletID: to, Amount: 0}, "wallet="+to),
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, set := range []struct {
		name string
		ids  []string
	}{{"uniform1000", uniform}, {"hot10", hot}} {
		for _, clients := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s-clients%d", set.name, clients), func(b *testing.B) {
				before := svc2.Executor().Stats()
				var wg sync.WaitGroup
				var failed error
				var mu sync.Mutex
				per := (b.N + clients - 1) / clients
				start := time.Now()
				b.ResetTimer()
				for range clients {
					wg.Go(func() {
						for range per {
							n := len(set.ids)
							f := rand.IntN(n)
							t := (f + 1 + rand.IntN(n-1)) % n
							_, err := svc2.Transfer(ctx, set.ids[f], set.ids[t], 1, nil)
							if err != nil && !errors.Is(err, wallet.ErrInsufficientFunds) {
								mu.Lock()
								failed = err
								mu.Unlock()
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				if failed != nil {
					b.Fatal(failed)
				}
				total := float64(per * clients)
				after := svc2.Executor().Stats()
				b.ReportMetric(total/time.Since(start).Seconds(), "transfers/s")
				b.ReportMetric(float64(after.Conflicts-before.Conflicts)/total, "conflicts/op")
				b.ReportMetric(float64(after.Retries-before.Retries)/total, "retries/op")
			})
		}
	}
}
