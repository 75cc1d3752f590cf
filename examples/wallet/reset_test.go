package wallet_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// checker samples the balances readers see, continuously, and checks each
// sample against the log's fold at the sample's own point: in one
// REPEATABLE READ transaction it locks the view (so that the snapshot comes
// after any switch of the view it waited for), then reads which projection
// the view shows, that projection's checkpoint and every balance. The
// checkpoint commits with the balances, so the balances must be exactly the
// fold of the log's events up to the checkpoint: a read model doubled,
// emptied without its checkpoint, or ahead of or behind its checkpoint
// fails it.
type checker struct {
	svc     *wallet.Service
	samples atomic.Int64
	served  map[string]int // samples per projection shown
	bad     []string
	// forward, once set, also fails a sample behind the one before it (the
	// view went back, emptied, to another version not caught up).
	forward atomic.Bool
	last    cursor.Cursor
}

func (c *checker) sample(ctx context.Context) error {
	pool := c.svc.Store().Pool()
	schema := pgx.Identifier{c.svc.Store().Schema()}.Sanitize()
	view := pgx.Identifier{c.svc.Store().Schema(), wallet.BalancesView}.Sanitize()
	var (
		name string
		at   cursor.Cursor
		got  = map[string]int64{}
	)
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE `+view+` IN ACCESS SHARE MODE`); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT c.name, c.transaction_id, c.position FROM `+schema+`.read_model_views v
			JOIN `+schema+`.checkpoints c ON c.name = v.projection WHERE v.view_name = $1`, view).
			Scan(&name, &at.TransactionID, &at.Position)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT wallet_id, balance FROM `+view)
		if err != nil {
			return err
		}
		var (
			id string
			v  int64
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &v}, func() error { got[id] = v; return nil })
		return err
	})
	if err != nil {
		return err
	}
	// Every event up to the checkpoint has committed (tailing reads stop at
	// the horizon): a later read of the log holds them all.
	evs, _, err := c.svc.Log().ReadAll(ctx, query.All(), nil)
	if err != nil {
		return err
	}
	want := map[string]int64{}
	for _, ev := range evs {
		if cursor.Compare(ev.TransactionID, ev.Position, at.TransactionID, at.Position) > 0 {
			continue
		}
		id, _ := ev.Tags.Get(wallet.TagKey)
		d, err := wallet.Delta(ev)
		if err != nil {
			return err
		}
		want[id] += d
	}
	c.samples.Add(1)
	c.served[name]++
	if !maps.Equal(got, want) {
		c.bad = append(c.bad, fmt.Sprintf("%s at %s: read %v, the log's fold %v", name, at, got, want))
	}
	if c.forward.Load() && cursor.Compare(at.TransactionID, at.Position, c.last.TransactionID, c.last.Position) < 0 {
		c.bad = append(c.bad, fmt.Sprintf("%s at %s: behind the sample before, at %s", name, at, c.last))
	}
	c.last = at
	return nil
}

// live runs transfers between n wallets and samples the balances until the
// returned stop is called; stop returns the checker.
func live(t *testing.T, svc *wallet.Service, n int) (c *checker, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c = &checker{svc: svc, served: map[string]int{}}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				from, to := fmt.Sprint("w", (w+i)%n), fmt.Sprint("w", (w+i+1)%n)
				if i%7 == 0 {
					_, _ = svc.Deposit(ctx, from, 5, nil)
				} else {
					_, _ = svc.Transfer(ctx, from, to, int64(1+i%4), nil)
				}
			}
		})
	}
	var sampleErr error
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := c.sample(ctx); err != nil && ctx.Err() == nil {
				sampleErr = err
				return
			}
		}
	})
	return c, func() {
		cancel()
		wg.Wait()
		require.NoError(t, sampleErr)
	}
}

// openWallets opens n wallets with 100 each.
func openWallets(t *testing.T, svc *wallet.Service, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprint("w", i)
		_, err := svc.Open(context.Background(), id, nil)
		require.NoError(t, err)
		_, err = svc.Deposit(context.Background(), id, 100, nil)
		require.NoError(t, err)
	}
}

// moreSamples waits until the checker has taken k more samples.
func moreSamples(t *testing.T, c *checker, k int64) {
	t.Helper()
	from := c.samples.Load()
	require.Eventually(t, func() bool { return c.samples.Load() >= from+k }, 30*time.Second, time.Millisecond)
}

// caughtUpBalances opens n wallets in a new service and runs its balances
// (version 1) until they have caught up.
func caughtUpBalances(t *testing.T, n int) (*wallet.Service, *wallet.Balances) {
	svc := newService(t)
	openWallets(t, svc, n)
	v1 := wallet.NewBalances(svc.Store(), &wallet.BalancesConfig{BatchSize: 3, PollInterval: 5 * time.Millisecond})
	require.NoError(t, v1.Setup(context.Background()))
	runBalances(t, v1)
	caughtUp(t, svc, v1)
	return svc, v1
}

// Under live transfers, a reset by another tool (projection.Reset without a
// clear function) and then a blue/green rebuild (version 2 built beside
// version 1, then projection.Switch): every balance a reader reads equals the
// log's at the point the read model says it is at, before, during and after
// both (the reset shows the model rebuilding from the start, with its
// checkpoint). From the rebuild on, no read goes back: the switch never shows
// an empty, doubled or older model, and after it the view shows version 2
// while version 1 is paused.
func TestResetAndRebuildUnderLiveTransfers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 5
	svc, v1 := caughtUpBalances(t, n)

	c, stop := live(t, svc, n)
	moreSamples(t, c, 10)
	require.NoError(t, projection.Reset(ctx, svc.Store(), v1.Projection().Name(), nil))
	moreSamples(t, c, 10)
	caughtUp(t, svc, v1)
	c.forward.Store(true) // from here no read may go back

	v2 := wallet.NewBalances(svc.Store(), &wallet.BalancesConfig{Version: 2, BatchSize: 3, PollInterval: 5 * time.Millisecond})
	require.NoError(t, v2.Setup(ctx))
	runBalances(t, v2)
	require.Eventually(t, func() bool { _, err := v2.Projection().Status(ctx); return err == nil }, 30*time.Second, time.Millisecond, "version 2 registered")
	moreSamples(t, c, 10)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, projection.Switch(sctx, svc.Store(), v2.Projection().Name()))
	moreSamples(t, c, 10)
	stop()

	require.Empty(t, c.bad, "samples that disagree with the log (of %d)", c.samples.Load())
	require.Positive(t, c.served[v1.Projection().Name()], "samples of version 1")
	require.Positive(t, c.served[v2.Projection().Name()], "samples of version 2")
	st, err := v1.Projection().Status(ctx)
	require.NoError(t, err)
	require.Equal(t, projection.Paused, st.State, "version 1 after the switch")
	caughtUp(t, svc, v1) // WaitFor follows the view to version 2
	cp, err := v1.Checkpoint(ctx)
	require.NoError(t, err)
	st2, err := v2.Projection().Status(ctx)
	require.NoError(t, err)
	require.Equal(t, st2.Cursor, cp, "as_of is version 2's")
	want := replay(t, svc)
	for id, bal := range want {
		got, ok, err := v1.Balance(ctx, id)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, bal, got, id)
	}
	t.Logf("%d samples: %v", c.samples.Load(), c.served)
}

// The check above can fail: a reset that moves only the checkpoint (what
// projection.Reset did before the read model's tables were registered)
// makes the balances disagree with the log at the checkpoint.
func TestCheckerCatchesACheckpointOnlyReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 5
	svc, v1 := caughtUpBalances(t, n)
	c, stop := live(t, svc, n)
	moreSamples(t, c, 5)
	// The old Reset's statement, without the read model.
	_, err := svc.Store().Pool().Exec(ctx, `UPDATE `+pgx.Identifier{svc.Store().Schema()}.Sanitize()+`.checkpoints
		SET transaction_id = '0', position = 0 WHERE name = $1`, v1.Projection().Name())
	require.NoError(t, err)
	caughtUp(t, svc, v1)
	stop()
	require.NotEmpty(t, c.bad, "a checkpoint-only reset must be caught (%d samples)", c.samples.Load())
	t.Logf("%d of %d samples caught it; first: %s", len(c.bad), c.samples.Load(), c.bad[0])
}
