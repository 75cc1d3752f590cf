package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Cost is what the measured repetitions of an operation (or of its floor)
// cost per event, summed over the repetitions: what bounds a throughput
// ratio when the machine's CPU or the server's WAL is saturated.
//
// ServerUs counts every process of the server's cluster (backends, WAL
// writer, checkpointer, the postmaster's exited children); it is nil when
// the server does not run on this machine. WALBytes and Xacts are
// cluster-wide. All of them include whatever else runs at the same time:
// take them on a quiet machine and server.
type Cost struct {
	// ClientUs is CPU time of this process (user + system), µs per event.
	ClientUs float64 `json:"client_us"`
	// ServerUs is CPU time of the server's processes, µs per event.
	ServerUs *float64 `json:"server_us,omitempty"`
	// WALBytes is WAL written per event.
	WALBytes float64 `json:"wal_bytes"`
	// Xacts is transaction ids assigned per event: the transactions that
	// wrote (appends, groups, NOTIFYs), each a commit record.
	Xacts float64 `json:"xacts"`
	// MachineBusy is not per event: the share of the machine's CPU time
	// (all cores, every process: this program, the servers, anything else)
	// that was busy during the measured repetitions, from /proc/stat; nil
	// where /proc/stat cannot be read. Near 1, the machine itself bounds
	// rates and latencies.
	MachineBusy *float64 `json:"machine_busy,omitempty"`
}

func (c *Cost) String() string {
	if c == nil {
		return ""
	}
	s := fmt.Sprintf("client %.0f µs", c.ClientUs)
	if c.ServerUs != nil {
		s += fmt.Sprintf(", server %.0f µs", *c.ServerUs)
	}
	s += fmt.Sprintf(", WAL %.0f B, %.3f xacts", c.WALBytes, c.Xacts)
	if c.MachineBusy != nil {
		s += fmt.Sprintf(", machine CPU %.0f%% busy", *c.MachineBusy*100)
	}
	return s
}

// meter takes the readings Cost is computed from.
type meter struct {
	pool       *pgxpool.Pool
	postmaster int // 0: the server is not on this machine (or not readable)
}

// newMeter finds the server's postmaster through a backend's parent, when
// that backend is a process of this machine named postgres.
func newMeter(ctx context.Context, pool *pgxpool.Pool) *meter {
	m := &meter{pool: pool}
	var pid int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return m
	}
	st, err := readStat(pid)
	if err != nil || st.comm != "postgres" {
		return m
	}
	if pm, err := readStat(st.ppid); err == nil && pm.comm == "postgres" {
		m.postmaster = st.ppid
	}
	return m
}

type reading struct {
	clientUs, serverUs float64
	lsn, nextXid       float64
	serverOK           bool
	busy, total        float64 // /proc/stat's cpu line, in ticks
	machineOK          bool
}

func (m *meter) read(ctx context.Context) (reading, error) {
	var r reading
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return r, err
	}
	r.clientUs = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
	if err := m.pool.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::float8,
		pg_snapshot_xmax(pg_current_snapshot())::text::float8`).Scan(&r.lsn, &r.nextXid); err != nil {
		return r, fmt.Errorf("reading the WAL position: %w", err)
	}
	if m.postmaster != 0 {
		r.serverUs, r.serverOK = clusterCPU(m.postmaster)
	}
	r.busy, r.total, r.machineOK = machineCPU()
	return r, nil
}

// machineCPU reads the first line of /proc/stat (every core, in ticks):
// busy is user, nice, system, irq, softirq and steal; total adds idle and
// iowait (guest time is inside user already).
func machineCPU() (busy, total float64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, name := range []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"} {
		v, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if name != "idle" && name != "iowait" {
			busy += v
		}
	}
	return busy, total, true
}

// costSum adds up the readings around each measured repetition.
type costSum struct {
	clientUs, serverUs, wal, xacts float64
	busy, total                    float64
	events                         int64
	serverOK, machineOK            bool
	n                              int
}

func (c *costSum) add(before, after reading, events int64) {
	c.clientUs += after.clientUs - before.clientUs
	c.wal += after.lsn - before.lsn
	c.xacts += after.nextXid - before.nextXid
	ok := before.serverOK && after.serverOK
	mok := before.machineOK && after.machineOK
	if c.n == 0 {
		c.serverOK, c.machineOK = ok, mok
	}
	c.serverOK = c.serverOK && ok
	c.machineOK = c.machineOK && mok
	c.serverUs += after.serverUs - before.serverUs
	c.busy += after.busy - before.busy
	c.total += after.total - before.total
	c.events += events
	c.n++
}

func (c *costSum) cost() *Cost {
	if c.n == 0 || c.events <= 0 {
		return nil
	}
	e := float64(c.events)
	out := &Cost{ClientUs: c.clientUs / e, WALBytes: c.wal / e, Xacts: c.xacts / e}
	if c.serverOK {
		s := c.serverUs / e
		out.ServerUs = &s
	}
	if c.machineOK && c.total > 0 {
		b := c.busy / c.total
		out.MachineBusy = &b
	}
	return out
}

type procStat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime float64 // clock ticks
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	// After the command: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
	num := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v }
	ppid, _ := strconv.Atoi(f[1])
	return procStat{comm: s[open+1 : closing], ppid: ppid, utime: num(11), stime: num(12), cutime: num(13), cstime: num(14)}, nil
}

// clockTicks is USER_HZ, 100 on Linux (the /proc/<pid>/stat times' unit).
const clockTicks = 100

// clusterCPU is the CPU time, in µs, of the postmaster, its children, and
// (through the postmaster's cutime and cstime) its children that exited.
func clusterCPU(postmaster int) (float64, bool) {
	pm, err := readStat(postmaster)
	if err != nil {
		return 0, false
	}
	ticks := pm.utime + pm.stime + pm.cutime + pm.cstime
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != postmaster {
			continue
		}
		ticks += st.utime + st.stime
	}
	return ticks * 1e6 / clockTicks, true
}
