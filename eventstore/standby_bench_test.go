package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgtest"
	"github.com/pgdcb/pgdcb/query"
)

// BenchmarkStandbyDecision measures the primary's work per decision (a
// ReadAll of one entity's events, then an AppendIf of one event) with the
// read on the primary and on the standby (Config.ReadPool): the CPU time of
// the primary's processes per decision (primary-cpu-us/decision), from
// /proc. On a 2-core machine shared by both servers and the client, compare
// the two rows of one run: the share of the primary's work the standby
// takes, not a speed-up.
//
//	go test -run '^$' -bench StandbyDecision -benchtime 2000x ./eventstore/
func BenchmarkStandbyDecision(b *testing.B) {
	pair := pgtest.StandbyPair(b)
	const entities, history = 50, 10
	for _, reads := range []string{"primary", "standby"} {
		b.Run("reads="+reads, func(b *testing.B) {
			ctx := context.Background()
			onPrimary, onStandby, pp, _ := standbyStores(b, pair, nil)
			var seed []eventstore.Event
			for e := range entities {
				for h := range history {
					seed = append(seed, eventstore.MustEvent("Changed", h, fmt.Sprintf("entity=e%d", e)))
				}
			}
			_, err := onPrimary.Append(ctx, seed)
			require.NoError(b, err)
			require.NoError(b, pair.Sync(ctx))
			s := onPrimary
			if reads == "standby" {
				s = onStandby
			}
			pm := postmasterOf(b, pp)
			conflicts := 0
			b.ResetTimer()
			before := clusterCPUUs(b, pm)
			for i := range b.N {
				q := query.Tagged(nil, fmt.Sprintf("entity=e%d", i%entities))
				_, cur, err := s.ReadAll(ctx, q, nil)
				if err != nil {
					b.Fatal(err)
				}
				_, err = s.AppendIf(ctx, []eventstore.Event{eventstore.MustEvent("Changed", i, fmt.Sprintf("entity=e%d", i%entities))},
					appendif.FailIf(q, &cur))
				if err != nil {
					conflicts++
				}
			}
			after := clusterCPUUs(b, pm)
			b.StopTimer()
			b.ReportMetric((after-before)/float64(b.N), "primary-cpu-us/decision")
			b.ReportMetric(float64(conflicts)/float64(b.N), "conflicts/decision")
		})
	}
}

// postmasterOf is the pid of the postmaster of pool's server (the parent of
// a backend), which must run on this machine.
func postmasterOf(tb testing.TB, pool *pgxpool.Pool) int {
	var pid int
	require.NoError(tb, pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid))
	_, ppid, _ := procTimes(tb, pid)
	return ppid
}

// clusterCPUUs is the CPU time in µs of the postmaster, its children and
// its exited children.
func clusterCPUUs(tb testing.TB, postmaster int) float64 {
	ticks, _, children := procTimes(tb, postmaster)
	ticks += children
	dirs, err := os.ReadDir("/proc")
	require.NoError(tb, err)
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
		if len(f) < 15 || f[1] != strconv.Itoa(postmaster) {
			continue
		}
		t, _, _ := procTimes(tb, pid)
		ticks += t
	}
	return ticks * 1e6 / 100 // USER_HZ
}

// procTimes returns utime+stime (ticks), the parent pid, and cutime+cstime.
func procTimes(tb testing.TB, pid int) (ticks float64, ppid int, children float64) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, 0 // exited meanwhile
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	num := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v }
	ppid, _ = strconv.Atoi(f[1])
	return num(11) + num(12), ppid, num(13) + num(14)
}
