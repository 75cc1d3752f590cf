package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A wallet of a default run (make demo) decides from snapshots: with the
// demo's store configuration, the decisions of its share of the default
// transfers (half of 2 × transfers / wallets, a low estimate: about 70% commit)
// write a snapshot and later decisions load it. With the store's default
// SnapshotEvery (100), a default run wrote none.
func TestDefaultRunUsesSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := options{nWallets: defaultWallets, nTransfers: defaultTransfers, snapshots: true, snapshotEvery: defaultSnapshotEvery}
	store, _ := teststore.New(t, storeConfig(o, ""))
	svc, err := wallet.New(store, nil)
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		_, err := svc.Open(ctx, id, nil)
		require.NoError(t, err)
	}
	_, err = svc.Deposit(ctx, "a", 1_000_000, nil)
	require.NoError(t, err)
	perWallet := o.nTransfers / o.nWallets
	for range perWallet {
		_, err := svc.Transfer(ctx, "a", "b", 1, nil)
		require.NoError(t, err)
	}
	// A snapshot is taken at a point below the horizon, which a transaction
	// of another test may hold for a while, and written in the background:
	// read the wallet again (a decision read that appends nothing, so the
	// events past the snapshot stay perWallet-odd) until one is written, with
	// a deadline.
	await.Until(t, time.Minute, func() (bool, string) {
		if st := store.SnapshotStats(); st.Written > 0 || st.WriteFailures > 0 {
			return true, ""
		}
		_, err := svc.Wallet(ctx, "a")
		require.NoError(t, err)
		return false, fmt.Sprintf("no snapshot written after %d transfers: %+v", perWallet, store.SnapshotStats())
	})
	require.Zero(t, store.SnapshotStats().WriteFailures)
	_, err = svc.Transfer(ctx, "a", "b", 1, nil)
	require.NoError(t, err)
	st := store.SnapshotStats()
	require.Positive(t, st.Loaded, "a later decision starts from the snapshot: %+v", st)
	require.NotContains(t, snapshotSummary(o, st), "none written")
	require.Contains(t, snapshotSummary(o, store.SnapshotStats()), "loaded ")
}

// The summary says why no snapshot was written.
func TestSnapshotSummarySaysWhyNone(t *testing.T) {
	t.Parallel()
	o := options{snapshots: true, snapshotEvery: 20}
	require.Contains(t, snapshotSummary(o, eventstore.SnapshotStats{}), "none written: no wallet's decision folded 20 events")
	require.Equal(t, "off (-snapshots=false)", snapshotSummary(options{}, eventstore.SnapshotStats{}))
}

// The demo with -read-dsn on a streaming standby: decisions and reads there,
// appends on the primary; its own checks (conservation, the read model) pass.
func TestStandbyDemoReadDSN(t *testing.T) {
	pair := pgtest.StandbyPair(t)
	t.Setenv(pgserver.EnvVar, pair.Primary.DSN())
	o := options{nWallets: 6, initial: 100, nTransfers: 60, clients: 4, snapshots: true,
		snapshotEvery: defaultSnapshotEvery, readDSN: pair.Standby.DSN()}
	require.NoError(t, run(o))
}
