package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
)

// BenchmarkGroup: one event per call on distinct boundaries, Append and
// AppendIf (fail if the boundary has any event), with group commit off and
// on, against the autocommit single-row INSERT floor of the same run, at 1, 8
// and 32 writers (same pool, same schema). x-floor is events/s over the
// floor's events/s just measured. BENCH_GROUP_SENDERS sets GroupSenders;
// BENCH_SYNC_OFF=1 runs every connection with synchronous_commit off.
//
//	go test ./eventstore -run '^$' -bench 'Group' -benchtime 2s
func BenchmarkGroup(b *testing.B) {
	off, pool := newStore(b, nil)
	if os.Getenv("BENCH_SYNC_OFF") != "" {
		// Without the commit's WAL flush, whose latency on a shared machine
		// swamps everything else: the mechanisms' own cost.
		cfg, err := pgxpool.ParseConfig(pgtest.DSN(b))
		require.NoError(b, err)
		cfg.MaxConns = pgtest.DefaultMaxConns
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
		pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(b, err)
		b.Cleanup(pool.Close)
		off, err = eventstore.New(pool, &eventstore.Config{Schema: off.Schema()})
		require.NoError(b, err)
	}
	senders, _ := strconv.Atoi(os.Getenv("BENCH_GROUP_SENDERS")) // 0: the default
	on, err := eventstore.New(pool, &eventstore.Config{Schema: off.Schema(), GroupSenders: senders})
	require.NoError(b, err)
	tbl := floorTable(b, off, pool)
	for _, writers := range []int{1, 8, 32} {
		var floor float64
		b.Run(fmt.Sprintf("floor/writers=%d", writers), func(b *testing.B) {
			benchWriters(b, writers, func(ctx context.Context, n int64) error {
				_, err := pool.Exec(ctx, "INSERT INTO "+tbl+" (type, tags, data) VALUES ($1, $2, $3)",
					"Deposited", []string{fmt.Sprintf("account=a%d", n)}, `{"amount": 10}`)
				return err
			})
			floor = float64(b.N) / b.Elapsed().Seconds()
			reportRate(b, int64(b.N))
		})
		for _, v := range []struct {
			name string
			s    *eventstore.Store
		}{{"off", off}, {"on", on}} {
			s := v.s
			before := s.GroupStats()
			b.Run(fmt.Sprintf("Append-%s/writers=%d", v.name, writers), func(b *testing.B) {
				benchWriters(b, writers, func(ctx context.Context, n int64) error {
					_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, fmt.Sprintf("account=a%d", n))})
					return err
				})
				reportRate(b, int64(b.N))
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/floor, "x-floor")
			})
			b.Run(fmt.Sprintf("AppendIf-%s/writers=%d", v.name, writers), func(b *testing.B) {
				benchWriters(b, writers, func(ctx context.Context, n int64) error {
					tag := fmt.Sprintf("account=b%d", n)
					_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, tag)},
						appendif.FailIf(query.Tagged(nil, tag), nil))
					return err
				})
				reportRate(b, int64(b.N))
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/floor, "x-floor")
			})
			if v.name == "on" {
				st := s.GroupStats()
				g, n := st.Groups-before.Groups, st.Grouped-before.Grouped
				if g > 0 {
					b.Logf("writers=%d: %d groups, %.1f appends/group, max %d, %d alone", writers, g, float64(n)/float64(g), st.MaxAppends, st.Alone-before.Alone)
				}
			}
		}
	}
}
