package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
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
			var seed []pgdcb.Event
			for e := range entities {
				for h := range history {
					seed = append(seed, pgdcb.MustEvent("Changed", h, fmt.Sprintf("entity=e%d", e)))
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
				_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Changed", i, fmt.Sprintf("entity=e%d", i%entities))},
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

// BenchmarkStandbyProof measures a decision read on the standby (a ReadAll of
// one entity's 10 events) behind a transaction held open on the primary,
// with gaps ids spent since without events (one committed transaction of
// subtransactions), or txs transactions that wrote events: the read's time
// (ns/op), as a ratio to the same read without a held transaction in the
// same run (x-no-gaps), and the ids its cursor lists as in progress
// (xip/read: the gaps on the standby; the primary's few when the read ran
// on the primary, past the proof's bounds: gaps=100000 and txs=101, where
// the first read runs the proof and the others skip it). The appendif rows
// time an AppendIf after such a cursor (its check probes every id listed).
//
//	go test -run '^$' -bench StandbyProof -benchtime 200x ./eventstore/
func BenchmarkStandbyProof(b *testing.B) {
	pair := pgtest.StandbyPair(b)
	ctx := context.Background()
	onPrimary, onStandby, pp, sp := standbyStores(b, pair, &eventstore.Config{NotifyDisabled: true})
	const entities, history = 50, 10
	var seed []pgdcb.Event
	for e := range entities {
		for h := range history {
			seed = append(seed, pgdcb.MustEvent("Changed", h, fmt.Sprintf("entity=e%d", e)))
		}
	}
	_, err := onPrimary.Append(ctx, seed)
	require.NoError(b, err)
	var base float64 // ns per read without a held transaction
	cases := []struct {
		name      string
		gaps, txs int
	}{{"gaps=0", 0, 0}, {"gaps=10", 10, 0}, {"gaps=1000", 1000, 0}, {"gaps=1900", 1900, 0}, {"gaps=100000", 100000, 0},
		{"txs=98", 0, 98}, {"txs=101", 0, 101}}
	none := query.Tagged(nil, "entity=none")
	var curs []cursor.Cursor
	for _, c := range cases {
		var held *pgtest.HeldXID
		if c.name != "gaps=0" {
			held = pgtest.HoldXID(b, pair.Primary.DSN())
			// The held id and the spending transaction's own are gaps too.
			if c.gaps > 2 {
				spendXIDs(b, pp, onPrimary.Schema(), c.gaps-2)
			}
			for i := range c.txs {
				_, err := onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", i, "other=o1")})
				require.NoError(b, err)
			}
		}
		_, err := onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Changed", "head", "entity=e0")})
		require.NoError(b, err)
		require.NoError(b, pair.Sync(ctx))
		var gaps int64
		require.NoError(b, sp.QueryRow(ctx, `SELECT h - x + 1 - (SELECT count(DISTINCT transaction_id) FROM `+
			pgx.Identifier{onStandby.Schema(), "events"}.Sanitize()+` WHERE transaction_id::text::bigint >= x)
			FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS x,
				(SELECT max(transaction_id)::text::bigint FROM `+pgx.Identifier{onStandby.Schema(), "events"}.Sanitize()+`) AS h) v`).
			Scan(&gaps))
		b.Run(c.name, func(b *testing.B) {
			xip := 0
			b.ResetTimer()
			for i := range b.N {
				_, cur, err := onStandby.ReadAll(ctx, query.Tagged(nil, fmt.Sprintf("entity=e%d", i%entities)), nil)
				if err != nil {
					b.Fatal(err)
				}
				xip += len(cur.Snapshot.Xip)
			}
			b.StopTimer()
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if c.name == "gaps=0" {
				base = per
			}
			if base > 0 {
				b.ReportMetric(per/base, "x-no-gaps")
			}
			b.ReportMetric(float64(max(gaps, 0)), "gaps")
			b.ReportMetric(float64(xip)/float64(b.N), "xip/read")
		})
		// A cursor of such a read, for the AppendIf rows below.
		_, cur, err := onStandby.ReadAll(ctx, none, nil)
		require.NoError(b, err)
		curs = append(curs, cur)
		if held != nil {
			held.Release()
		}
	}
	// The check of an AppendIf after each case's cursor, on the primary (a
	// condition nothing matches, an event it does not match), once the held
	// transactions ended: appendif-x-no-gaps is its time as a ratio to that
	// after the cursor of the read without a held transaction.
	var baseAppend float64
	for k, c := range cases {
		cur := curs[k]
		b.Run("appendif/"+c.name, func(b *testing.B) {
			for i := range b.N {
				_, err := onPrimary.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", i, "other=o2")}, appendif.FailIf(none, &cur))
				if err != nil {
					b.Fatal(err)
				}
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if k == 0 {
				baseAppend = per
			}
			if baseAppend > 0 {
				b.ReportMetric(per/baseAppend, "x-no-gaps")
			}
			b.ReportMetric(float64(len(cur.Snapshot.Xip)), "xip")
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
