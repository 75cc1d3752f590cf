package eventstore

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
	"github.com/pgdcb/pgdcb/tags"
)

// BenchmarkAloneCPU: the CPU of one append of one event (two tags, as the
// bench's) sent on one connection three ways: append_events as the
// per-call path sends it ("events"), as the group committer sends an append
// alone (tryCallAlone: append_events behind the key try, "alone"), and as
// it sent it before issue #26 (a one-member append_group behind the try,
// "group"); without a check ("append") and with the AppendIf of the bench's
// appendif/distinct rows ("appendif": its own boundary, after its previous
// append). server-µs/op is the server process's CPU time
// (/proc/PID/schedstat: the server must run on this machine, else it is not
// reported), client-µs/op this process's. docs/GROUPCOMMIT.md, "A group of
// one".
//
//	go test ./eventstore -run '^$' -bench AloneCPU -benchtime 3000x -count 5
func BenchmarkAloneCPU(b *testing.B) {
	ctx := context.Background()
	schema := pgtest.Schema(b)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		b.Fatal(err)
	}
	s, err := New(pool, &Config{Schema: schema, NotifyDisabled: true})
	if err != nil {
		b.Fatal(err)
	}
	boundary := 0
	for _, check := range []string{"append", "appendif"} {
		for _, way := range []string{"events", "alone", "group"} {
			b.Run(check+"/"+way, func(b *testing.B) {
				conn, err := pool.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Release()
				boundary++
				writer := "writer=" + strconv.Itoa(boundary)
				var after *cursor.Cursor
				one := func(i int) {
					ev := pgdcb.Event{Type: "BenchAppended", Tags: tags.MustParseSet("account="+strconv.Itoa(i%100), writer),
						Data: json.RawMessage(`{"n":` + strconv.Itoa(i) + `,"amount":42,"note":"benchmark payload"}`)}
					var cond *appendif.Condition
					if check == "appendif" {
						c := appendif.FailIf(query.Tagged([]string{"BenchAppended"}, writer), after)
						cond = &c
					}
					r := &groupReq{ctx: ctx, events: []pgdcb.Event{ev}, cond: cond, id: s.settler.callID([]pgdcb.Event{ev}),
						locks: locksFor(schema, []pgdcb.Event{ev}, cond, s.cfg.MaxLockKeys)}
					var out []groupResult
					var res pgdcb.AppendResult
					switch way {
					case "events":
						res, err = s.appendEvents(ctx, conn, r.events, cond, true, r.id)
					case "alone":
						out, _, err = s.tryCallAlone(ctx, conn, r)
					case "group":
						out, _, err = s.group.tryCall(ctx, conn, []*groupReq{r})
					}
					if err == nil && out != nil {
						res, err = out[0].res, out[0].err
					}
					if err != nil {
						b.Fatal(err)
					}
					after = &cursor.Cursor{TransactionID: res.TransactionID, Position: res.Positions[0]}
				}
				for i := range 100 { // past the plan cache's custom plans
					one(i)
				}
				pid := int(conn.Conn().PgConn().PID())
				srv0, ok := runNs(pid)
				cli0 := selfCPUNs()
				b.ResetTimer()
				for i := range b.N {
					one(i)
				}
				b.StopTimer()
				if srv1, ok1 := runNs(pid); ok && ok1 {
					b.ReportMetric(float64(srv1-srv0)/1e3/float64(b.N), "server-µs/op")
				}
				b.ReportMetric(float64(selfCPUNs()-cli0)/1e3/float64(b.N), "client-µs/op")
			})
		}
	}
}

// runNs is the CPU time of process pid so far (ns), when it runs on this
// machine.
func runNs(pid int) (int64, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return ns, err == nil
}

// selfCPUNs is this process's CPU time so far (user + system, ns).
func selfCPUNs() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
