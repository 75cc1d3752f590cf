package eventstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
)

// BenchmarkSettleCost: what settling costs a call that succeeds, with 1, 8
// and 32 writers: the call id on the first event of each call (one more
// events_event_id entry per call, a UUIDv7 made on the client) against
// Config.SettleDisabled (no id: the calls before settling existed), and
// against a pool that pings every connection it hands out (pgxpool pings
// only those idle for more than a second by default). Three stores, each on
// a pool of its own, measured PAIRED: every writer calls each store in turn
// (the order rotating), so that all three see the same load from moment to
// moment (the machine is shared; unpaired runs of the same row differed by
// ±50%). Each row reports the mean latency per store and on/off, the
// throughput of settle=on relative to settle=off (off latency / on
// latency):
//
//	go test ./eventstore -run '^$' -bench SettleCost -benchtime 2s -count 3
//
// The Batch100 rows weigh one id per call against one id per event (every
// event of a 100-event Append carrying an id), paired the same way.
func BenchmarkSettleCost(b *testing.B) {
	on, _ := newStore(b, nil)
	off, _ := newStore(b, &eventstore.Config{SettleDisabled: true})
	pcfg := pgtest.Pool(b).Config()
	pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
	pingPool, err := pgxpool.NewWithConfig(b.Context(), pcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pingPool.Close)
	ping := teststore.OnPool(b, pingPool, nil)
	stores := []*eventstore.Store{off, on, ping}
	names := []string{"off", "on", "ping"}

	paired := func(b *testing.B, writers int, call func(ctx context.Context, s *eventstore.Store, n int64) error) {
		var total [3]atomic.Int64
		var turn atomic.Int64
		benchWriters(b, writers, func(ctx context.Context, n int64) error {
			first := int(turn.Add(1) % 3)
			for k := range 3 {
				i := (first + k) % 3
				t0 := time.Now()
				if err := call(ctx, stores[i], n); err != nil {
					return err
				}
				total[i].Add(int64(time.Since(t0)))
			}
			return nil
		})
		for i := range total {
			b.ReportMetric(float64(total[i].Load())/float64(b.N)/1e3, "us/"+names[i])
		}
		b.ReportMetric(float64(total[0].Load())/float64(total[1].Load()), "on/off")
		b.ReportMetric(float64(total[0].Load())/float64(total[2].Load()), "ping/off")
	}
	for _, writers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("Append/writers=%d", writers), func(b *testing.B) {
			paired(b, writers, func(ctx context.Context, s *eventstore.Store, n int64) error {
				_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, fmt.Sprintf("account=s%d", n))})
				return err
			})
		})
		b.Run(fmt.Sprintf("AppendIf/writers=%d", writers), func(b *testing.B) {
			paired(b, writers, func(ctx context.Context, s *eventstore.Store, n int64) error {
				tag := fmt.Sprintf("account=t%d", n)
				_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, tag)},
					appendif.FailIf(query.Tagged(nil, tag), nil))
				return err
			})
		})
	}
	// One id per call (settle=on) against one per event (the caller gives
	// every event an id, on the store without settling) and none.
	const size = 100
	b.Run("Batch100", func(b *testing.B) {
		var total [3]atomic.Int64
		batch := make([]pgdcb.Event, size)
		ctx := context.Background()
		for b.Loop() {
			n := seq.Add(1)
			for j := range 3 {
				k := (int(n) + j) % 3 // the order rotates
				for i := range size {
					batch[i] = pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, fmt.Sprintf("account=u%d-%d", n, i))
					if k == 2 {
						batch[i].ID, _ = uuid.NewV7()
					}
				}
				s := []*eventstore.Store{off, on, off}[k]
				t0 := time.Now()
				if _, err := s.Append(ctx, batch); err != nil {
					b.Fatal(err)
				}
				total[k].Add(int64(time.Since(t0)))
			}
		}
		for i, name := range []string{"none", "per-call", "per-event"} {
			b.ReportMetric(float64(total[i].Load())/float64(b.N)/1e3, "us/"+name)
		}
		b.ReportMetric(float64(total[0].Load())/float64(total[1].Load()), "per-call/none")
		b.ReportMetric(float64(total[0].Load())/float64(total[2].Load()), "per-event/none")
	})
}
