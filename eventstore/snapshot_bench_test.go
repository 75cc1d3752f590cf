package eventstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// BenchmarkDecisionRead: Project of one entity's model at 10 … 10,000
// events, without and with snapshots (the snapshot written by the policy
// after a first Project, then 50 more events). Reports the p50 per call.
//
//	go test ./eventstore/ -run '^$' -bench DecisionRead -benchtime 300x
func BenchmarkDecisionRead(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		for _, snap := range []bool{false, true} {
			b.Run(fmt.Sprintf("events=%d/snapshots=%v", n, snap), func(b *testing.B) {
				ctx := context.Background()
				s, pool := newStore(b, nil)
				q := query.Tagged(nil, "e=1")
				appendN(b, s, n, "e=1")
				appendN(b, s, 1000, "e=2") // another entity's events
				// A state of constant size, as an entity's decision state is.
				model := func() *eventstore.Model[benchState] {
					m := eventstore.NewModel(q, benchState{}, func(st benchState, ev eventstore.StoredEvent) benchState {
						st.N++
						st.Last = ev.Position
						return st
					})
					if snap {
						m.WithSnapshots("bench", 1)
					}
					return m
				}
				_, err := s.Project(ctx, model())
				require.NoError(b, err)
				eventstore.WaitSnapshotWrites(s)
				appendN(b, s, min(50, n), "e=1") // the snapshot lags behind the head
				// As autovacuum would have by then: planner statistics.
				_, err = pool.Exec(ctx, "ANALYZE "+s.QuotedSchema()+".events")
				require.NoError(b, err)
				durs := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for b.Loop() {
					t0 := time.Now()
					m := model()
					_, err := s.Project(ctx, m)
					durs = append(durs, time.Since(t0))
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				eventstore.WaitSnapshotWrites(s)
				slices.Sort(durs)
				b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs")
			})
		}
	}
}

type benchState struct {
	N    int   `json:"n"`
	Last int64 `json:"last"`
}
