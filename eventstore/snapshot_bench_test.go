package eventstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/query"
)

// decisionReadSizes are the entity histories BenchmarkDecisionRead compares.
var decisionReadSizes = []int{10, 100, 1000, 10000}

// BenchmarkDecisionRead: Project of one entity's model with 10 … 10,000
// events, without and with snapshots (the snapshot written by the policy
// after a first Project, then 50 more events, so that the snapshot lags
// behind the head as it does between two writes of the policy; at 10 events
// the policy has written none). One store per size; each iteration projects
// every size once, in a rotating order, so that all sizes see the same load
// on a shared machine. Reports the p50 per size and the ratio of the p50 at
// 10,000 events to the p50 at 10.
//
//	go test ./eventstore/ -run '^$' -bench DecisionRead -benchtime 300x
func BenchmarkDecisionRead(b *testing.B) {
	for _, snap := range []bool{false, true} {
		b.Run(fmt.Sprintf("snapshots=%v", snap), func(b *testing.B) {
			ctx := context.Background()
			q := query.Tagged(nil, "e=1")
			// A state of constant size, as an entity's decision state is.
			model := func() *pgdcb.Model[benchState] {
				m := pgdcb.NewModel(q, benchState{}, func(st benchState, ev pgdcb.StoredEvent) benchState {
					st.N++
					st.Last = ev.Position
					return st
				})
				if snap {
					m.WithSnapshots("bench", 1)
				}
				return m
			}
			stores := make([]*eventstore.Store, len(decisionReadSizes))
			for i, n := range decisionReadSizes {
				s, pool := newStore(b, nil)
				appendN(b, s, n, "e=1")
				appendN(b, s, 1000, "e=2") // another entity's events
				_, err := s.Project(ctx, model())
				require.NoError(b, err)
				eventstore.WaitSnapshotWrites(s)
				appendN(b, s, min(50, n), "e=1") // the snapshot lags behind the head
				// As autovacuum would have by then: planner statistics.
				_, err = pool.Exec(ctx, "ANALYZE "+ident.Schema(s)+".events")
				require.NoError(b, err)
				stores[i] = s
			}
			durs := make([][]time.Duration, len(stores))
			b.ResetTimer()
			round := 0
			for b.Loop() {
				for k := range stores {
					i := (round + k) % len(stores)
					t0 := time.Now()
					_, err := stores[i].Project(ctx, model())
					durs[i] = append(durs[i], time.Since(t0))
					if err != nil {
						b.Fatal(err)
					}
				}
				round++
			}
			b.StopTimer()
			p50 := make([]float64, len(stores))
			for i, s := range stores {
				eventstore.WaitSnapshotWrites(s)
				slices.Sort(durs[i])
				p50[i] = float64(durs[i][len(durs[i])/2].Microseconds())
				b.ReportMetric(p50[i], fmt.Sprintf("p50-µs@%d", decisionReadSizes[i]))
			}
			b.ReportMetric(p50[len(p50)-1]/p50[0], fmt.Sprintf("p50@%d/p50@%d", decisionReadSizes[len(p50)-1], decisionReadSizes[0]))
		})
	}
}

type benchState struct {
	N    int   `json:"n"`
	Last int64 `json:"last"`
}
