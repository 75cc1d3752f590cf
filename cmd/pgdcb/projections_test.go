package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	pgdcbcommands "github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// Issue #38 §4: `pgdcb projections reset` on the wallet's balances, running,
// doubled every balance (43 → 86). The balances' projection registers its
// table; the reset empties it with the checkpoint, and the balance is 43
// again once rebuilt. -checkpoint-only is refused on it: there is no way to
// double it from here. switch moves the view to a second version.
func TestProjectionsResetTheWallet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh, schema := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	store, err := eventstore.New(pgtest.Pool(t), &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	svc, err := wallet.New(store, &wallet.Config{Commands: &pgdcbcommands.Config{MaxAttempts: 50}})
	require.NoError(t, err)
	b := wallet.NewBalances(store, nil)
	require.NoError(t, b.Setup(ctx))
	_, err = svc.Open(ctx, "w1", nil)
	require.NoError(t, err)
	_, err = svc.Deposit(ctx, "w1", 43, nil)
	require.NoError(t, err)
	run := func(b *wallet.Balances) {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- b.Run(rctx) }()
		t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	}
	balance := func() int64 {
		last, _, err := store.ReadLast(ctx, query.All())
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, b.WaitFor(wctx, cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}))
		got, ok, err := b.Balance(ctx, "w1")
		require.NoError(t, err)
		require.True(t, ok)
		return got
	}
	run(b)
	require.EqualValues(t, 43, balance())

	name := b.Projection().Name()
	r := sh("", "projections", "reset", "-checkpoint-only", name)
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "registered its read model's tables")
	r = sh("", "projections", "reset", name)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "emptied")
	require.EqualValues(t, 43, balance(), "after the reset")

	r = sh("", "projections", "switch", name)
	require.Equal(t, 0, r.code, "switching to the version that serves: nothing to do: %s", r.stderr)
	b2 := wallet.NewBalances(store, &wallet.BalancesConfig{Version: 2})
	require.NoError(t, b2.Setup(ctx))
	run(b2)
	require.Eventually(t, func() bool { _, err := b2.Projection().Status(ctx); return err == nil }, 30*time.Second, time.Millisecond)
	r = sh("", "projections", "-json", "switch", b2.Projection().Name())
	require.Equal(t, 0, r.code, r.stderr)
	require.EqualValues(t, 43, balance(), "after the switch")
	st, err := projection.GetStatus(ctx, store, name)
	require.NoError(t, err)
	require.Equal(t, projection.Paused, st.State, "the previous version")
}

// `pgdcb projections list` shows a partitioned projection: its partitions,
// how many its workers hold, and the lag of its furthest-behind partition.
func TestProjectionsListsPartitioned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh, schema := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	store, err := eventstore.New(pgtest.Pool(t), &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	for i := range 20 {
		_, err := store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("W", i, fmt.Sprint("wallet=w", i%5))})
		require.NoError(t, err)
	}
	p, err := projection.NewPartitioned(store, "by-wallet", query.Tagged([]string{"W"}),
		func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error { return nil },
		&projection.PartitionConfig{Key: "wallet", Partitions: 4, Lease: time.Second,
			ReaderConfig: projection.ReaderConfig{PollInterval: 50 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond}})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	defer func() { cancel(); <-done }()
	var got struct {
		Projections []projectionJSON `json:"projections"`
	}
	await.True(t, 20*time.Second, "the list shows the caught-up partitions", func() bool {
		r := sh("", "-json", "projections", "list")
		require.Equal(t, 0, r.code, r.stderr)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
		return len(got.Projections) == 1 && got.Projections[0].Held == 4 && got.Projections[0].Lag == 0
	})
	require.Equal(t, projectionJSON{Name: "by-wallet", State: "PARTITIONED", Cursor: got.Projections[0].Cursor, UpdatedAt: got.Projections[0].UpdatedAt,
		Partitions: 4, Held: 4, Workers: 1}, got.Projections[0])
	r := sh("", "projections", "list")
	require.Contains(t, r.stdout, "1 workers, 4/4 held", r.stdout)
}
