package eventstore_test

// Guarantees of docs/CONCURRENCY.md, each raced many rounds with real concurrent
// transactions on the real server. A round releases all racers together after
// each has taken its decision, so the appends really overlap.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/racecheck"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// The racing is shared with the conformance suite (which also runs the
// replayed races: conformance_test.go).
var (
	race     = racecheck.Race
	outcomes = racecheck.Outcomes
)

func countEvents(t *testing.T, s *eventstore.Store, q query.Query) int {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), q, nil)
	require.NoError(t, err)
	return len(evs)
}

// 1. Same condition: 16 racers claim one username, 50 rounds: one winner each.
func TestRaceUniqueUsername(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	const racers, rounds = 16, 50
	for r := range rounds {
		name := fmt.Sprintf("username=user%d", r)
		q := query.Tagged([]string{"AccountRegistered"}, name)
		errs := race(racers, func(i int) func() error {
			evs, cur, err := s.ReadAll(ctx, q, nil)
			if err != nil || len(evs) > 0 {
				return func() error { return fmt.Errorf("decision read: %v, %d events", err, len(evs)) }
			}
			return func() error {
				_, err := s.AppendIf(ctx, []pgdcb.Event{
					pgdcb.MustEvent("AccountRegistered", map[string]int{"racer": i}, name, fmt.Sprintf("account=a%d-%d", r, i)),
				}, appendif.FailIf(q, &cur))
				return err
			}
		})
		ok, conflict, _ := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d: winners", r)
		require.Equal(t, racers-1, conflict, "round %d", r)
		require.Equal(t, 1, countEvents(t, s, q), "round %d: stored claims", r)
	}
}

type course struct {
	capacity, subscribers int
}

// 2. Overlapping, different conditions: capacity on the course tag, a limit on
// the student tag. Each racer decides on its own (course, student) pair.
func TestRaceCourseCapacityAndStudentLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	const rounds, courses, students, racers = 20, 4, 4, 16
	for r := range rounds {
		var defs []pgdcb.Event
		for c := range courses {
			defs = append(defs, pgdcb.MustEvent("CourseDefined", map[string]int{"capacity": 1}, fmt.Sprintf("course=r%dc%d", r, c)))
		}
		_, err := s.Append(ctx, defs)
		require.NoError(t, err)

		errs := race(racers, func(i int) func() error {
			courseTag := fmt.Sprintf("course=r%dc%d", r, rand.IntN(courses))
			studentTag := fmt.Sprintf("student=r%ds%d", r, rand.IntN(students))
			cm := pgdcb.NewModel(query.Tagged([]string{"CourseDefined", "StudentSubscribed"}, courseTag), course{},
				func(st course, ev pgdcb.StoredEvent) course {
					if ev.Type == "CourseDefined" {
						st.capacity = 1
					} else {
						st.subscribers++
					}
					return st
				})
			sm := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, studentTag), 0,
				func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
			cond, err := s.Project(ctx, cm, sm)
			if err != nil {
				return func() error { return err }
			}
			if cm.State.subscribers >= cm.State.capacity || sm.State >= 1 {
				return func() error { return nil } // rejected by the decision itself
			}
			return func() error {
				_, err := s.AppendIf(ctx, []pgdcb.Event{
					pgdcb.MustEvent("StudentSubscribed", map[string]int{}, courseTag, studentTag),
				}, cond)
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
		evs, _, err := s.ReadAll(ctx, query.New(query.Item{Types: []string{"StudentSubscribed"}}), nil)
		require.NoError(t, err)
		for _, ev := range evs {
			c, _ := ev.Tags.Get("course")
			st, _ := ev.Tags.Get("student")
			perCourse[c]++
			perStudent[st]++
		}
		for c, n := range perCourse {
			require.LessOrEqual(t, n, 1, "round %d: course %s over capacity", r, c)
		}
		for st, n := range perStudent {
			require.LessOrEqual(t, n, 1, "round %d: student %s over limit", r, st)
		}
	}
}

// 2b. Many students race for one course of capacity 1, 30 rounds.
func TestRaceCourseCapacityOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	for r := range 30 {
		courseTag := fmt.Sprintf("course=c%d", r)
		_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("CourseDefined", map[string]int{"capacity": 1}, courseTag)})
		require.NoError(t, err)
		q := query.Tagged([]string{"StudentSubscribed"}, courseTag)
		errs := race(16, func(i int) func() error {
			evs, cur, err := s.ReadAll(ctx, q, nil)
			if err != nil || len(evs) > 0 {
				return func() error { return fmt.Errorf("decision read: %v, %d events", err, len(evs)) }
			}
			return func() error {
				_, err := s.AppendIf(ctx, []pgdcb.Event{
					pgdcb.MustEvent("StudentSubscribed", map[string]int{}, courseTag, fmt.Sprintf("student=s%d", i)),
				}, appendif.FailIf(q, &cur))
				return err
			}
		})
		ok, _, _ := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d", r)
		require.Equal(t, 1, countEvents(t, s, q), "round %d", r)
	}
}

// 3. Multi-item OR: a condition with two items conflicts with an event that
// matches only the second item, and not with one that matches neither (a
// flattened AND of all types and tags would get both wrong).
func TestConditionItemsAreORed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	q := query.New(
		query.Item{Types: []string{"A"}, Tags: tags.MustParseSet("x=1")},
		query.Item{Types: []string{"B"}, Tags: tags.MustParseSet("y=1")},
	)
	cur, err := s.Head(ctx)
	require.NoError(t, err)
	// Matches neither item: type A but only tag y=1.
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("A", 1, "y=1")})
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("C", 1, "z=1")}, appendif.FailIf(q, &cur))
	require.NoError(t, err, "an event matching no item must not conflict")

	cur, err = s.Head(ctx)
	require.NoError(t, err)
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("B", 1, "y=1", "w=2")})
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("C", 1, "z=1")}, appendif.FailIf(q, &cur))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "an event matching only the second item must conflict")
	var cfe *appendif.ConditionFailedError
	require.ErrorAs(t, err, &cfe)
	require.Equal(t, cur, *cfe.After)
}

// 4. An unrelated open write transaction neither blinds the check nor makes it
// fail forever.
func TestUnrelatedOpenTransaction(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t, nil)
	q := query.Tagged(nil, "account=1")
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", 1, "account=1")})
	require.NoError(t, err)

	// Another connection holds a transaction with an xid open throughout.
	other, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback(ctx)
	var otherXid uint64
	require.NoError(t, other.QueryRow(ctx, "SELECT pg_current_xact_id()").Scan(&otherXid))

	_, stale, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.LessOrEqual(t, stale.Snapshot.Xmin, otherXid, "the open transaction holds the snapshot's xmin down")

	// A conflicting event commits while the old transaction stays open.
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 5, "account=1")})
	require.NoError(t, err)

	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Withdrawn", 5, "account=1")}, appendif.FailIf(q, &stale))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "a stale decision must fail")

	evs, fresh, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Withdrawn", 5, "account=1")}, appendif.FailIf(q, &fresh))
	require.NoError(t, err, "a fresh decision must succeed while the old transaction is open")

	// Tailing readers are held at the horizon (other tests' transactions may
	// hold it lower still: the horizon is cluster-wide), and catch up after it
	// moves.
	b, err := s.ReadTail(ctx, q, cursor.Start, 100)
	require.NoError(t, err)
	require.LessOrEqual(t, b.Horizon, otherXid)
	require.LessOrEqual(t, len(b.Events), 1, "nothing newer than the open transaction")
	require.NoError(t, other.Rollback(ctx))
	got := append(b.Events, tailUntil(t, s, q, b.Cursor, 3-len(b.Events))...)
	require.Len(t, got, 3, "opened, deposited, withdrawn")
}

// tailUntil follows the log from after until it has n events; the horizon is
// cluster-wide, so other tests' open transactions can delay it for a while.
func tailUntil(t *testing.T, s *eventstore.Store, q query.Query, after cursor.Cursor, n int) []pgdcb.StoredEvent {
	t.Helper()
	var got []pgdcb.StoredEvent
	await.Until(t, time.Minute, func() (bool, string) {
		b, err := s.ReadTail(context.Background(), q, after, 100)
		require.NoError(t, err)
		got = append(got, b.Events...)
		after = b.Cursor
		return len(got) >= n, fmt.Sprintf("tail at horizon %d with %d of %d events", b.Horizon, len(got), n)
	})
	return got
}

// 7. Tailing order: A takes the lower position and commits after B; a tailing
// reader delivers both, A first, and never skips A.
func TestTailingReaderNeverSkipsLateCommit(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t, nil)
	q := query.All()
	for round := range 10 {
		start, err := s.ReadTail(ctx, q, cursor.Start, 0)
		require.NoError(t, err)
		after := start.Cursor

		txA, err := pool.Begin(ctx)
		require.NoError(t, err)
		resA, err := s.AppendTx(ctx, txA, []pgdcb.Event{pgdcb.MustEvent("A", round, "w=a")})
		require.NoError(t, err)
		resB, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("B", round, "w=b")})
		require.NoError(t, err)
		require.Less(t, resA.Positions[0], resB.Positions[0], "A took the lower position")

		// While A is open, B is committed but held back: delivering it now
		// would move the cursor past A.
		b, err := s.ReadTail(ctx, q, after, 100)
		require.NoError(t, err)
		require.Empty(t, b.Events, "round %d: nothing may pass the open transaction A", round)
		require.LessOrEqual(t, b.Horizon, resA.TransactionID)
		after = b.Cursor
		require.NoError(t, txA.Commit(ctx))

		got := tailUntil(t, s, q, after, 2)
		require.Len(t, got, 2, "round %d", round)
		require.Equal(t, resA.Positions[0], got[0].Position, "A first: lower transaction id")
		require.Equal(t, resB.Positions[0], got[1].Position)
	}
}

// An escalated batch (more keys than MaxLockKeys) takes the global key alone
// and still conflicts correctly.
func TestRaceEscalatedBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, &eventstore.Config{MaxLockKeys: 8})
	for r := range 10 {
		tag := fmt.Sprintf("boundary=b%d", r)
		q := query.Tagged(nil, tag)
		errs := race(6, func(i int) func() error {
			_, cur, err := s.ReadAll(ctx, q, nil)
			return func() error {
				if err != nil {
					return err
				}
				var batch []pgdcb.Event
				for k := range 10 { // 10 distinct tags: escalates
					batch = append(batch, pgdcb.MustEvent("Item", k, tag, fmt.Sprintf("item=r%di%dk%d", r, i, k)))
				}
				_, err := s.AppendIf(ctx, batch, appendif.FailIf(q, &cur))
				return err
			}
		})
		ok, _, _ := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d", r)
		require.Equal(t, 10, countEvents(t, s, q))
	}
}

// An append in progress when the decision read its snapshot, committing after
// it with a position below the decision's cursor: the decision did not see it,
// so reads after the cursor return it and the check conflicts with it.
func TestInProgressAtDecisionIsNotSeen(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t, nil)
	q := query.Tagged(nil, "account=9")
	txA, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer txA.Rollback(ctx)
	resA, err := s.AppendTx(ctx, txA, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, "account=9")})
	require.NoError(t, err)
	// A later, committed event puts the cursor's position past A's.
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Noise", 1, "other=1")})
	require.NoError(t, err)

	evs, cur, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Empty(t, evs)
	require.Contains(t, cur.Snapshot.Xip, resA.TransactionID, "A was in progress at the decision")
	require.Greater(t, cur.Position, resA.Positions[0])
	require.NoError(t, txA.Commit(ctx))

	after, _, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{After: &cur})
	require.NoError(t, err)
	require.Len(t, after, 1, "reading after the cursor returns A")
	require.False(t, cur.Seen(after[0].TransactionID, after[0].Position))
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Withdrawn", 1, "account=9")}, appendif.FailIf(q, &cur))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "A was not seen by the decision")
}

// A decision far behind the head (more than a thousand events since) is
// checked by the planned statement rather than the recent-rows scan; both must
// answer the same.
func TestOldDecisionIsCheckedToo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	q := query.Tagged(nil, "account=old")
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", 1, "account=old")})
	require.NoError(t, err)
	_, cur, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	var noise []pgdcb.Event
	for i := range 1000 {
		noise = append(noise, pgdcb.MustEvent("Noise", i, fmt.Sprintf("n=%d", i)))
	}
	for range 2 {
		_, err = s.Append(ctx, noise)
		require.NoError(t, err)
	}
	// Nothing matching since the decision: passes.
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", 1, "account=other")}, appendif.FailIf(q, &cur))
	require.NoError(t, err)
	// A matching event since the decision, then more noise: fails.
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, "account=old")})
	require.NoError(t, err)
	_, err = s.Append(ctx, noise)
	require.NoError(t, err)
	for _, typ := range [][]string{nil, {"Deposited"}} {
		t.Run(fmt.Sprintf("types %v", typ), func(t *testing.T) {
			_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Withdrawn", 1, "account=old")},
				appendif.FailIf(query.Tagged(typ, "account=old"), &cur))
			require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "types %v", typ)
		})
	}
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Withdrawn", 1, "account=old")},
		appendif.FailIf(query.New(query.Item{Types: []string{"Deposited"}}), &cur))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "type-only item")
}
