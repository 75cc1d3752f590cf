package eventstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// TestCheckItemShapes: append_events receives the checks' items flattened
// (each item's types and tags appended to two arrays, with counts) and checks
// them by three statements: without a cursor, against a recent cursor, against
// an old one (more than a thousand events back). Each path must find an event
// that matches exactly one item, whichever item it is, and must not be fooled
// by an event that matches a mix of items; the idempotency items, passed
// before the condition's, must keep their own outcome.
func TestCheckItemShapes(t *testing.T) {
	t.Parallel()
	// The queries of probe p: items of every shape, with different counts of
	// types and tags so that a wrong offset reads another item's values.
	idem := func(p int) query.Query {
		return query.New(
			query.Item{Tags: tags.MustParseSet(fmt.Sprintf("op=%d", p), fmt.Sprintf("step=%d", p))},
			query.Item{Types: []string{fmt.Sprintf("Done%d", p)}},
		)
	}
	cond := func(p int) query.Query {
		return query.New(
			query.Item{Types: []string{fmt.Sprintf("A%d", p), fmt.Sprintf("B%d", p)}, Tags: tags.MustParseSet(fmt.Sprintf("x=%d", p), fmt.Sprintf("y=%d", p))},
			query.Item{Tags: tags.MustParseSet(fmt.Sprintf("z=%d", p))},
			query.Item{Types: []string{fmt.Sprintf("C%d", p)}},
		)
	}
	type probe struct {
		name string
		typ  string
		tags []string
		want error // nil: the append goes through
	}
	probes := func(p int) []probe {
		s := func(f string) string { return fmt.Sprintf(f, p) }
		return []probe{
			{"matches no item: type of item 1, one of its two tags", s("B%d"), []string{s("x=%d")}, nil},
			{"matches no item: tags of item 1, another type", s("D%d"), []string{s("x=%d"), s("y=%d")}, nil},
			{"matches no item: idempotency tags in part", s("D%d"), []string{s("op=%d")}, nil},
			{"matches item 1 only", s("B%d"), []string{s("x=%d"), s("y=%d"), s("w=%d")}, pgdcb.ErrConditionFailed},
			{"matches item 2 only", s("D%d"), []string{s("z=%d")}, pgdcb.ErrConditionFailed},
			{"matches item 3 only", s("C%d"), nil, pgdcb.ErrConditionFailed},
			{"matches idempotency item 1", s("D%d"), []string{s("op=%d"), s("step=%d")}, pgdcb.ErrIdempotent},
			{"matches idempotency item 2 and condition item 2", s("Done%d"), []string{s("z=%d")}, pgdcb.ErrIdempotent},
		}
	}

	for _, path := range []string{"no cursor", "recent cursor", "old cursor"} {
		t.Run(path, func(t *testing.T) {
			ctx := context.Background()
			s, _ := newStore(t, nil)
			var noise []pgdcb.Event
			for i := range 1000 {
				noise = append(noise, pgdcb.MustEvent("Noise", i, fmt.Sprintf("n=%d", i)))
			}
			for p := range len(probes(0)) {
				pr := probes(p)[p]
				t.Run(pr.name, func(t *testing.T) {
					var after *cursor.Cursor
					if path != "no cursor" {
						head, err := s.Head(ctx)
						require.NoError(t, err)
						after = &head
					}
					if path == "old cursor" {
						for range 2 {
							_, err := s.Append(ctx, noise)
							require.NoError(t, err)
						}
					}
					_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent(pr.typ, 1, pr.tags...)})
					require.NoError(t, err)
					c := appendif.FailIf(cond(p), after).WithIdempotency(idem(p))
					_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Probe", 1, fmt.Sprintf("probe=%d", p))}, c)
					if pr.want == nil {
						require.NoError(t, err, pr.name)
					} else {
						require.ErrorIs(t, err, pr.want, pr.name)
					}
				})
			}
		})
	}
}
