package eventstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/eventstore/conformance"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// The PostgreSQL store passes the suite that memstore passes, each check on a
// fresh schema, its races (exactly one winner, overlapping and multi-item
// conditions, mixed writers, idempotency: docs/CONCURRENCY.md) 30 rounds
// each.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.RunWithOptions(t, func(t *testing.T) pgdcb.Store {
		s, _ := erasableStore(t, nil)
		return s
	}, &conformance.Options{Rounds: 30, WithUpcasters: func(t testing.TB, reg *upcast.Registry) pgdcb.Store {
		s, _ := newStore(t, &eventstore.Config{Upcasters: reg})
		return s
	}})
}

// BenchmarkStoresDecision is one decision on each store: Project a model over
// an entity of 10 events, then AppendIf with its condition (which commits).
// The memstore figure is what a unit test of a command handler pays.
func BenchmarkStoresDecision(b *testing.B) {
	stores := []struct {
		name string
		new  func(b *testing.B) pgdcb.Store
	}{
		{"postgres", func(b *testing.B) pgdcb.Store { s, _ := newStore(b, nil); return s }},
		{"memstore", func(*testing.B) pgdcb.Store { return memstore.MustNew(nil) }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			ctx := context.Background()
			s := st.new(b)
			q := query.Tagged([]string{"Deposited"}, "account=a1")
			for i := range 10 {
				_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", i, "account=a1")})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				m := pgdcb.NewModel(q, 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
				cond, err := s.Project(ctx, m)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Withdrawn", i, fmt.Sprintf("account=b%d", i))}, cond); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
