package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Racers that all decided on the same empty boundary claim it at once:
// exactly one wins, the others fail their condition, one event is stored.
func testRaceExactlyOne(t testing.TB, s pgdcb.Store, o Options) {
	ctx := context.Background()
	for r := range o.Rounds {
		name := fmt.Sprintf("username=user%d", r)
		q := query.Tagged([]string{"AccountRegistered"}, name)
		errs := race(o.Racers, func(i int) func() error {
			evs, cur, err := s.ReadAll(ctx, q, nil)
			if err != nil || len(evs) > 0 {
				return func() error { return fmt.Errorf("decision read: %v, %d events", err, len(evs)) }
			}
			return func() error {
				_, err := s.AppendIf(ctx, []pgdcb.Event{
					ev("AccountRegistered", map[string]int{"racer": i}, name, tag("account", r, i)),
				}, appendif.FailIf(q, &cur))
				return err
			}
		})
		ok, conflict, _ := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d: winners", r)
		require.Equal(t, o.Racers-1, conflict, "round %d", r)
		require.Equal(t, 1, count(t, s, q), "round %d: stored claims", r)
	}
}

// Overlapping, different conditions: capacity on the course tag, a limit on
// the student tag; each racer decides on its own (course, student) pair with
// two models in one Project.
func testRaceOverlapping(t testing.TB, s pgdcb.Store, o Options) {
	ctx := context.Background()
	const courses, students = 4, 4
	type course struct{ capacity, subscribers int }
	for r := range o.Rounds {
		var defs []pgdcb.Event
		for c := range courses {
			defs = append(defs, ev("CourseDefined", map[string]int{"capacity": 1}, tag("course", r, c)))
		}
		appendOK(t, s, defs...)
		errs := race(o.Racers, func(i int) func() error {
			courseTag := tag("course", r, rand.IntN(courses))
			studentTag := tag("student", r, rand.IntN(students))
			cm := pgdcb.NewModel(query.Tagged([]string{"CourseDefined", "StudentSubscribed"}, courseTag), course{},
				func(st course, e pgdcb.StoredEvent) course {
					if e.Type == "CourseDefined" {
						st.capacity = 1
					} else {
						st.subscribers++
					}
					return st
				})
			sm := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, studentTag), 0, countFold)
			cond, err := s.Project(ctx, cm, sm)
			if err != nil {
				return func() error { return err }
			}
			if cm.State.subscribers >= cm.State.capacity || sm.State >= 1 {
				return func() error { return nil } // rejected by the decision itself
			}
			return func() error {
				_, err := s.AppendIf(ctx, []pgdcb.Event{ev("StudentSubscribed", map[string]int{}, courseTag, studentTag)}, cond)
				if errors.Is(err, pgdcb.ErrConditionFailed) {
					return nil
				}
				return err
			}
		})
		for _, err := range errs {
			require.NoError(t, err)
		}
		perCourse, perStudent := map[string]int{}, map[string]int{}
		for _, e := range readAll(t, s, query.New(query.Item{Types: []string{"StudentSubscribed"}})) {
			c, _ := e.Tags.Get("course")
			st, _ := e.Tags.Get("student")
			perCourse[c]++
			perStudent[st]++
		}
		for c, n := range perCourse {
			require.LessOrEqual(t, n, 1, "round %d: course %s over capacity", r, c)
		}
		for st, n := range perStudent {
			require.LessOrEqual(t, n, 1, "round %d: student %s over limit", r, st)
		}
		require.NotEmpty(t, perCourse, "round %d: somebody subscribed", r)
	}
}

// Multi-item OR, raced: half the racers append events matching only the
// condition's second item; the replay shows no committed decision missed one.
func testRaceMultiItem(t testing.TB, s pgdcb.Store, o Options) {
	ctx := context.Background()
	checked := 0
	// Rounds go on past o.Rounds (up to 20 times as many) until some
	// conditional append committed: when the plain appends of every round
	// win the race, which a loaded machine can arrange (failed once with 5
	// rounds and 0 commits, on memstore), the check would have nothing to
	// replay.
	for r := 0; r < o.Rounds || (checked == 0 && r < 20*o.Rounds); r++ {
		x, y := fmt.Sprintf("x=%d", r), fmt.Sprintf("y=%d", r)
		q := query.New(
			query.Item{Types: []string{"A"}, Tags: tags.MustParseSet(x)},
			query.Item{Types: []string{"B"}, Tags: tags.MustParseSet(y)},
		)
		errs := race(max(2, o.Racers/2), func(i int) func() error {
			if i%2 == 0 {
				return func() error {
					_, err := s.Append(ctx, []pgdcb.Event{ev("B", i, y)})
					return err
				}
			}
			cur, err := s.Head(ctx)
			return func() error {
				if err != nil {
					return err
				}
				_, err := s.AppendIf(ctx, []pgdcb.Event{ev("A", decisionRecord{Cursor: cur.String()}, x)}, appendif.FailIf(q, &cur))
				if errors.Is(err, pgdcb.ErrConditionFailed) {
					return nil
				}
				return err
			}
		})
		for _, err := range errs {
			require.NoError(t, err)
		}
		checked += verifyNoLostDecision(t, s, q)
	}
	require.Positive(t, checked, "some conditional appends must have committed and been checked")
}

// Conditional and unconditional writers on one boundary; the replay shows no
// conditional append committed over an event it should have seen.
func testRaceMixedWriters(t testing.TB, s pgdcb.Store, o Options) {
	ctx := context.Background()
	committed := 0
	for r := range o.Rounds {
		tg := fmt.Sprintf("counter=c%d", r)
		q := query.Tagged(nil, tg)
		errs := race(max(3, o.Racers*3/4), func(i int) func() error {
			if i%3 == 0 {
				return func() error {
					_, err := s.Append(ctx, []pgdcb.Event{ev("Bumped", map[string]int{"by": i}, tg)})
					return err
				}
			}
			_, cur, err := s.ReadAll(ctx, q, nil)
			return func() error {
				if err != nil {
					return err
				}
				_, err := s.AppendIf(ctx, []pgdcb.Event{
					ev("Decided", decisionRecord{Cursor: cur.String()}, tg, fmt.Sprintf("racer=%d", i)),
				}, appendif.FailIf(q, &cur))
				if errors.Is(err, pgdcb.ErrConditionFailed) {
					return errConflict
				}
				return err
			}
		})
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else if err != errConflict {
				require.NoError(t, err)
			}
		}
		conditionalOK := ok - (len(errs)+2)/3 // the unconditional writers all succeed
		checked := verifyNoLostDecision(t, s, q)
		require.Equal(t, conditionalOK, checked, "round %d: every committed decision replayed", r)
		require.LessOrEqual(t, checked, 1, "round %d: racers that all read the empty boundary: at most one decision commits", r)
		committed += checked
	}
	require.Positive(t, committed, "some conditional appends must have committed")
}

var errConflict = errors.New("condition failed")

// Idempotency race: appends carrying the same idempotency query at once:
// exactly one commits, the rest get ErrIdempotent.
func testRaceIdempotency(t testing.TB, s pgdcb.Store, o Options) {
	ctx := context.Background()
	for r := range o.Rounds {
		token := fmt.Sprintf("idempotency_token=t%d", r)
		idem := query.Tagged([]string{"OrderPlaced"}, token)
		errs := race(o.Racers, func(i int) func() error {
			return func() error {
				_, err := s.AppendIf(ctx, []pgdcb.Event{
					ev("OrderPlaced", map[string]int{"racer": i}, token, tag("order", r, i)),
				}, appendif.Condition{Idempotency: idem})
				return err
			}
		})
		ok, conflict, dup := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d", r)
		require.Equal(t, o.Racers-1, dup, "round %d", r)
		require.Zero(t, conflict)
		require.Equal(t, 1, count(t, s, idem), "round %d", r)
	}
}
