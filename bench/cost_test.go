package main

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
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
	require.Nil(t, c.cost().MachineBusy, "no reading had the machine's CPU")

	// The machine's share is busy over total ticks of all the runs, not
	// per event.
	var m costSum
	m.add(reading{busy: 100, total: 1000, machineOK: true}, reading{busy: 250, total: 1200, machineOK: true}, 5)
	m.add(reading{busy: 0, total: 0, machineOK: true}, reading{busy: 50, total: 300, machineOK: true}, 50)
	require.NotNil(t, m.cost().MachineBusy)
	require.InDelta(t, 0.4, *m.cost().MachineBusy, 1e-9)
	m.add(reading{machineOK: true}, reading{}, 1)
	require.Nil(t, m.cost().MachineBusy, "a run without the machine's CPU leaves it out")
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
	require.True(t, after.machineOK, "/proc/stat is read on Linux")
	require.Positive(t, after.total)
	require.GreaterOrEqual(t, after.total, before.total)
	require.LessOrEqual(t, after.busy, after.total)
	if m.postmaster != 0 {
		require.True(t, after.serverOK)
		require.Positive(t, after.serverUs)
	}
	self, err := readStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), self.ppid)
}
