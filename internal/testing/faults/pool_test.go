package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

// Scenario 7. 200 goroutines share a pool of 4 connections, each making 5
// calls (Append, AppendIf, Read) with a deadline of 1 to 8 ms: most calls
// time out, waiting for a connection or on the server. Afterwards no
// goroutine is left behind, every connection is back in the pool with no
// transaction open on the server, acknowledged appends are present once,
// and calls that failed with a definite error wrote nothing.
func TestPoolExhaustion(t *testing.T) {
	cluster(t)
	began := time.Now()
	e := newEnv(t)
	pool := newPool(t, "faults_pool", 4, nil)
	store := e.store(t, pool, nil)

	// Open the pool's 4 connections and let the store's notifier run once, so
	// that the baseline counts what legitimately stays.
	led := &ledger{}
	var warm sync.WaitGroup
	for i := range 4 {
		warm.Go(func() {
			id := fmt.Sprint("warm-", i)
			_, err := store.Append(t.Context(), batch("Warm", id, 1))
			led.add(attempt{id: id, kind: "warm-up", n: 1, err: err})
		})
	}
	warm.Wait()
	base := settledGoroutines(0)

	var reads, readErrs atomic.Int64
	var wg sync.WaitGroup
	for g := range 200 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for op := range 5 {
				id := fmt.Sprintf("g%d-%d", g, op)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rng.IntN(8))*time.Millisecond)
				switch rng.IntN(3) {
				case 0:
					_, err := store.Append(ctx, batch("One", id, 1))
					led.add(attempt{id: id, kind: "append-1", n: 1, err: err})
				case 1:
					acct := "acct=" + id
					_, err := store.AppendIf(ctx, batch("Distinct", id, 1, acct), appendif.FailIf(query.Tagged(nil, acct), nil))
					led.add(attempt{id: id, kind: "appendif-distinct", n: 1, err: err})
				default:
					reads.Add(1)
					if _, _, err := store.ReadAll(ctx, query.Tagged([]string{"One"}), &readOpts); err != nil {
						readErrs.Add(1)
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	loadDone := time.Now()

	// No goroutine left behind (the store's notifier may still run for a
	// moment: settle).
	after := settledGoroutines(base)
	if after > base {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		require.LessOrEqual(t, after, base, "goroutines leaked:\n%s", buf.String())
	}
	// Every connection back in the pool, none more than MaxConns.
	st := pool.Stat()
	require.Zero(t, st.AcquiredConns(), "connections still acquired")
	require.Zero(t, st.ConstructingConns(), "connections still being made")
	require.LessOrEqual(t, st.TotalConns(), int32(4))
	// No session of the pool is left in a statement or a transaction.
	require.Eventually(t, func() bool {
		var busy int
		err := e.admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'faults_pool' AND state <> 'idle'`).Scan(&busy)
		return err == nil && busy == 0
	}, 10*time.Second, 20*time.Millisecond, "server sessions of the pool still busy")
	// The pool still works.
	_, err := store.Append(t.Context(), batch("After", "after", 1))
	led.add(attempt{id: "after", kind: "after", n: 1, err: err})
	require.NoError(t, err)

	v := verify(t, e, led)
	v.f.Scenario = "7 pool of 4, 200 goroutines"
	v.f.Elapsed = time.Since(began)
	v.f.Settle = store.SettleStats()
	v.f.Note = fmt.Sprintf("goroutines %d before, %d after (settled %s after the load); pool total=%d idle=%d; reads=%d (%d failed); errors: %s",
		base, after, time.Since(loadDone).Round(time.Millisecond), st.TotalConns(), st.IdleConns(), reads.Load(), readErrs.Load(), kinds(errorsOf(led.all())))
	record(t, v.f)
	requireClean(t, v)
	requireUnknownOnlyWhenBudgetRanOut(t, v)
}

// readOpts keeps the scenario's reads short.
var readOpts = pgdcb.ReadOptions{Limit: 50}

// settledGoroutines waits up to 10 s for the number of goroutines to come
// down to target (0: to stop changing) and returns it.
func settledGoroutines(target int) int {
	n := runtime.NumGoroutine()
	stable := 0
	await.Within(10*time.Second, func() (bool, string) {
		m := runtime.NumGoroutine()
		defer func() { n = m }()
		switch {
		case target > 0 && m <= target:
			return true, ""
		case target == 0 && m == n:
			stable++
			return stable >= 10, ""
		default:
			stable = 0
		}
		return false, ""
	})
	return n
}
