package main

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/pgtest"
)

// Cost is the sum of the readings' differences over the events of the
// measured runs; the server's CPU only when every reading had it.
func TestCostSum(t *testing.T) {
	t.Parallel()
	var c costSum
	require.Nil(t, c.cost(), "no run, no cost")
	c.add(reading{clientUs: 100, serverUs: 1000, lsn: 0, nextXid: 10, serverOK: true},
		reading{clientUs: 400, serverUs: 1600, lsn: 3000, nextXid: 13, serverOK: true}, 3)
	c.add(reading{clientUs: 0, serverUs: 0, lsn: 5000, nextXid: 20, serverOK: true},
		reading{clientUs: 100, serverUs: 200, lsn: 6000, nextXid: 21, serverOK: true}, 1)
	got := c.cost()
	require.NotNil(t, got.ServerUs)
	require.Equal(t, Cost{ClientUs: 100, ServerUs: got.ServerUs, WALBytes: 1000, Xacts: 1}, *got)
	require.InDelta(t, 200, *got.ServerUs, 1e-9)

	c.add(reading{serverOK: true}, reading{serverOK: false}, 1)
	require.Nil(t, c.cost().ServerUs, "a run without the server's CPU leaves it out")
}

// The meter reads this process's CPU, the WAL position and the next xid,
// and the cluster's CPU when the server runs here; what it reads grows.
func TestMeterReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	m := newMeter(ctx, pool)
	before, err := m.read(ctx)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "SELECT pg_current_xact_id()") // assigns an xid, writes a commit record
	require.NoError(t, err)
	after, err := m.read(ctx)
	require.NoError(t, err)
	require.Greater(t, after.nextXid, before.nextXid)
	require.Greater(t, after.lsn, before.lsn)
	require.GreaterOrEqual(t, after.clientUs, before.clientUs)
	if m.postmaster != 0 {
		require.True(t, after.serverOK)
		require.Positive(t, after.serverUs)
	}
	self, err := readStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), self.ppid)
}
