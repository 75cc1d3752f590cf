package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/racecheck"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// standbyStores returns, in a fresh schema on the pair's primary, a store
// that reads on the primary and one whose reads go to the standby
// (Config.ReadPool), with the pools; the standby has replayed the schema.
func standbyStores(t testing.TB, pair *pgtest.Pair, cfg *eventstore.Config) (onPrimary, onStandby *eventstore.Store, pp, sp *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pp, sp = pair.Pools(t)
	schema := pair.Schema(t)
	_, err := pgdcbsql.Migrate(ctx, pp, schema)
	require.NoError(t, err)
	c := eventstore.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.Schema = schema
	onPrimary, err = eventstore.New(pp, &c)
	require.NoError(t, err)
	c.ReadPool = sp
	onStandby, err = eventstore.New(pp, &c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = onStandby.Close(context.Background()); _ = onPrimary.Close(context.Background()) })
	require.NoError(t, pair.Sync(ctx))
	return onPrimary, onStandby, pp, sp
}

// withApplyDelay sets the shared standby's apply delay for the test and puts
// it back to 0 after.
func withApplyDelay(t *testing.T, pair *pgtest.Pair, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, pair.Standby.SetApplyDelay(ctx, d))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, pair.Standby.SetApplyDelay(ctx, 0))
	})
}

// The trap, kept as a negative control: with a transaction open on the
// primary, the standby's pg_current_snapshot() lists no running id and
// pg_visible_in_snapshot calls it visible although its rows are not. A cursor
// built naively from that snapshot lets an AppendIf commit blind over the
// transaction's event once it commits; the cursor of a read on the standby
// store does not.
func TestStandbySnapshotTrap(t *testing.T) {
	pair := pgtest.StandbyPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	onPrimary, onStandby, pp, sp := standbyStores(t, pair, nil)
	q := query.Tagged(nil, "seat=s1")

	open, x := openSeatTrap(ctx, t, pair, onPrimary, pp)
	var err error

	var primarySnap, standbySnap string
	require.NoError(t, pp.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&primarySnap))
	var visible bool
	var rows int
	require.NoError(t, sp.QueryRow(ctx, `SELECT s::text, pg_visible_in_snapshot($1::text::xid8, s),
			(SELECT count(*) FROM `+pgx.Identifier{onStandby.Schema(), "events"}.Sanitize()+` WHERE transaction_id = $1::text::xid8)
		FROM pg_current_snapshot() s`, fmt.Sprint(x)).Scan(&standbySnap, &visible, &rows))
	t.Logf("open transaction %d: primary snapshot %s, standby snapshot %s", x, primarySnap, standbySnap)
	ps, err := cursor.ParseSnapshot(primarySnap)
	require.NoError(t, err)
	require.Contains(t, ps.Xip, x, "the primary lists the open transaction")
	ss, err := cursor.ParseSnapshot(standbySnap)
	require.NoError(t, err)
	require.Empty(t, ss.Xip, "the standby's snapshot lists no running transaction")
	require.Greater(t, ss.Xmax, x)
	require.True(t, visible, "pg_visible_in_snapshot says the open transaction is visible on the standby")
	require.Zero(t, rows, "although its rows are not")

	// A naive standby cursor: the head of the log in that snapshot.
	var head cursor.Cursor
	require.NoError(t, sp.QueryRow(ctx, `SELECT transaction_id::text::bigint, position FROM `+
		pgx.Identifier{onStandby.Schema(), "events"}.Sanitize()+` ORDER BY transaction_id DESC, position DESC LIMIT 1`).
		Scan(&head.TransactionID, &head.Position))
	naive := head
	naive.Snapshot = ss
	evs, ours, err := onStandby.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Empty(t, evs, "the standby read does not see the open transaction's event")
	require.False(t, ours.Seen(x, 1<<62), "our cursor does not count the open transaction as seen")
	hc, err := onStandby.Head(ctx)
	require.NoError(t, err)
	require.False(t, hc.Seen(x, 1<<62), "nor does Head's")

	require.NoError(t, open.Commit(ctx))
	_, err = onPrimary.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", "ours", "seat=s1")}, appendif.FailIf(q, &ours))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "our standby cursor: the append sees the event it did not read")
	_, err = onPrimary.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", "head", "seat=s1")}, appendif.FailIf(q, &hc))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "Head on the standby: the same")
	_, err = onPrimary.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", "naive", "seat=s1")}, appendif.FailIf(q, &naive))
	require.NoError(t, err, "the naive cursor commits blind: this is the trap")
	all, _, err := onPrimary.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, all, 2, "the seat was taken twice through the naive cursor")
}

// courseState is the capacity model of the standby races (JSON for
// decision snapshots).
type courseState struct {
	Defined     bool `json:"defined"`
	Capacity    int  `json:"capacity"`
	Subscribers int  `json:"subscribers"`
}

// standbyRaceCounts are the outcomes of one workload.
type standbyRaceCounts struct {
	attempts, ok, conflicts, rejected int
}

func (c standbyRaceCounts) conflictRate() float64 {
	if c.attempts == 0 {
		return 0
	}
	return float64(c.conflicts) / float64(c.attempts)
}

// runCourseRace has half the writers decide on (course, student) pairs with
// Project on s (two models, the course one with decision snapshots) and
// AppendIf on the primary, the other half write one counter tag:
// conditional appends after a ReadAll, or plain appends held open up to
// 20 ms (the trap's window). It returns the outcomes of the conditional
// appends.
//
// rounds is how many decisions each writer makes; 0 means as many as fit
// before until (the soak).
func runCourseRace(t *testing.T, s *eventstore.Store, courses, capacity, students, writers, rounds int, until time.Time) standbyRaceCounts {
	t.Helper()
	timeout := 3 * time.Minute
	if !until.IsZero() {
		timeout += time.Until(until)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		mu   sync.Mutex
		n    standbyRaceCounts
		errs []error
		wg   sync.WaitGroup
	)
	count := func(f func(*standbyRaceCounts)) { mu.Lock(); f(&n); mu.Unlock() }
	counter := query.Tagged(nil, "counter=c")
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; rounds == 0 && time.Now().Before(until) || i < rounds; i++ {
				if err := func() error {
					if w%2 == 1 { // the counter: conditional, or (every third round) plain
						if rand.IntN(3) == 0 {
							// A plain append held open a little: the
							// window in which a standby snapshot does not
							// list it as running (TestStandbySnapshotTrap).
							tx, err := s.Pool().Begin(ctx)
							if err != nil {
								return err
							}
							defer tx.Rollback(context.WithoutCancel(ctx))
							if _, err := s.AppendTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("Bumped", nil, "counter=c")}); err != nil {
								return err
							}
							time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
							return tx.Commit(ctx)
						}
						evs, cur, err := s.ReadAll(ctx, counter, nil)
						if err != nil {
							return err
						}
						rec := counterDecision{Cursor: cur.String()}
						for _, e := range evs {
							rec.Read = append(rec.Read, e.Position)
						}
						count(func(n *standbyRaceCounts) { n.attempts++ })
						_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Decided",
							rec, "counter=c", fmt.Sprintf("writer=w%d", w))},
							appendif.FailIf(counter, &cur))
						return countOutcome(count, err)
					}
					course := fmt.Sprintf("course=c%d", rand.IntN(courses))
					student := fmt.Sprintf("student=s%d", rand.IntN(students))
					cm := pgdcb.NewModel(query.Tagged([]string{"CourseDefined", "StudentSubscribed"}, course), courseState{},
						func(st courseState, e pgdcb.StoredEvent) courseState {
							if e.Type == "CourseDefined" {
								st.Defined, st.Capacity = true, capacity
							} else {
								st.Subscribers++
							}
							return st
						})
					cm.Name, cm.Version = "course", 1
					sm := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, student), []string{},
						func(st []string, e pgdcb.StoredEvent) []string {
							c, _ := e.Tags.Get("course")
							return append(st, c)
						})
					cond, err := s.Project(ctx, cm, sm)
					if err != nil {
						return err
					}
					already := false
					for _, c := range sm.State {
						already = already || "course="+c == course
					}
					if !cm.State.Defined || cm.State.Subscribers >= cm.State.Capacity || len(sm.State) >= 2 || already {
						count(func(n *standbyRaceCounts) { n.rejected++ })
						return nil
					}
					count(func(n *standbyRaceCounts) { n.attempts++ })
					_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed",
						racecheck.DecisionRecord{Cursor: cond.After.String()}, course, student)}, cond)
					return countOutcome(count, err)
				}(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return n
}

func countOutcome(count func(func(*standbyRaceCounts)), err error) error {
	switch {
	case err == nil:
		count(func(n *standbyRaceCounts) { n.ok++ })
	case errors.Is(err, pgdcb.ErrConditionFailed):
		count(func(n *standbyRaceCounts) { n.conflicts++ })
	default:
		return err
	}
	return nil
}

// verifyCourseRace replays the log on the primary: no course over capacity,
// no student over the limit or twice in a course, and no committed decision
// (course or counter) over an event its cursor did not see that sorts
// before it.
func verifyCourseRace(t *testing.T, onPrimary *eventstore.Store, capacity int) (decisions int) {
	t.Helper()
	ctx := context.Background()
	all, _, err := onPrimary.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	perCourse, perStudent, pairs := map[string]int{}, map[string]int{}, map[string]int{}
	for _, e := range all {
		if e.Type != "StudentSubscribed" {
			continue
		}
		c, _ := e.Tags.Get("course")
		st, _ := e.Tags.Get("student")
		perCourse[c]++
		perStudent[st]++
		pairs[c+"/"+st]++
	}
	for c, k := range perCourse {
		require.LessOrEqual(t, k, capacity, "course %s over capacity", c)
	}
	for st, k := range perStudent {
		require.LessOrEqual(t, k, 2, "student %s over the limit", st)
	}
	for p, k := range pairs {
		require.Equal(t, 1, k, "subscription %s twice", p)
	}
	for _, e := range all {
		var rec racecheck.DecisionRecord
		if e.Type != "StudentSubscribed" || json.Unmarshal(e.Data, &rec) != nil || rec.Cursor == "" {
			continue
		}
		cur, err := cursor.Parse(rec.Cursor)
		require.NoError(t, err)
		c, _ := e.Tags.Get("course")
		st, _ := e.Tags.Get("student")
		q := query.Tagged([]string{"CourseDefined", "StudentSubscribed"}, "course="+c).
			Or(query.Tagged([]string{"StudentSubscribed"}, "student="+st))
		decisions++
		for _, f := range all {
			if f.Position == e.Position || !q.Matches(f.Type, f.Tags) || cur.Seen(f.TransactionID, f.Position) {
				continue
			}
			require.Positive(t, cursor.Compare(f.TransactionID, f.Position, e.TransactionID, e.Position),
				"decision %d committed over event %d that its read did not see", e.Position, f.Position)
		}
	}
	decisions += racecheck.VerifyNoLostDecision(t, onPrimary, query.Tagged(nil, "counter=c"))
	// The same for the counter without trusting the cursors: every event
	// that sorts before a decision committed before it (a later one on its
	// key waited for its lock, and took a larger id), so the decision's read
	// must have returned it.
	for _, e := range all {
		var rec counterDecision
		if e.Type != "Decided" || json.Unmarshal(e.Data, &rec) != nil {
			continue
		}
		read := map[int64]bool{}
		for _, p := range rec.Read {
			read[p] = true
		}
		for _, f := range all {
			if _, ok := f.Tags.Get("counter"); !ok || f.Position == e.Position {
				continue
			}
			if cursor.Compare(f.TransactionID, f.Position, e.TransactionID, e.Position) < 0 {
				require.True(t, read[f.Position], "decision %d (tx %d) committed over event %d (tx %d) that its read did not return",
					e.Position, e.TransactionID, f.Position, f.TransactionID)
			}
		}
	}
	return decisions
}

// counterDecision is a counter decision's record: its cursor and the
// positions its read returned.
type counterDecision struct {
	Cursor string  `json:"cursor"`
	Read   []int64 `json:"read"`
}

// soakEnv, set to a duration, makes TestStandbyDecisionsExactUnderLag a
// soak (make soak-standby).
const soakEnv = "PGDCB_STANDBY_SOAK"

// Decision reads on the standby at an apply delay of 0, 50 and 500 ms (and
// on the primary, the baseline of the same run): no committed decision ever
// missed an event, whatever the lag; the conflict rate per lag is logged
// (docs/REPLICAS.md).
//
// With PGDCB_STANDBY_SOAK set to a duration (make soak-standby: 30s), each
// lag runs that long instead of 12 decisions per writer, on 1,000 courses and
// 5,000 students so that seats stay free, and logs the false-conflict rate:
// the conflict rate above the primary's of the same run.
func TestStandbyDecisionsExactUnderLag(t *testing.T) {
	pair := pgtest.StandbyPair(t)
	const capacity, writers = 3, 8
	courses, students, rounds := 8, 24, 12
	var soak time.Duration
	if v := os.Getenv(soakEnv); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%s: a duration such as 30s", soakEnv)
		soak, courses, students, rounds = d, 1000, 5000, 0
	}
	baseline := -1.0
	for _, lag := range []time.Duration{-1, 0, 50 * time.Millisecond, 500 * time.Millisecond} {
		name := "primary"
		if lag >= 0 {
			name = fmt.Sprintf("standby-%dms", lag.Milliseconds())
		}
		t.Run(name, func(t *testing.T) {
			onPrimary, onStandby, _, _ := standbyStores(t, pair, &eventstore.Config{SnapshotEvery: 2})
			var defs []pgdcb.Event
			for c := range courses {
				defs = append(defs, pgdcb.MustEvent("CourseDefined", nil, fmt.Sprintf("course=c%d", c)))
			}
			_, err := onPrimary.Append(context.Background(), defs)
			require.NoError(t, err)
			s := onStandby
			if lag < 0 {
				s = onPrimary
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				require.NoError(t, pair.Sync(ctx))
				cancel()
				withApplyDelay(t, pair, lag)
			}
			start := time.Now()
			var until time.Time
			if soak > 0 {
				until = start.Add(soak)
			}
			n := runCourseRace(t, s, courses, capacity, students, writers, rounds, until)
			decisions := verifyCourseRace(t, onPrimary, capacity)
			require.Positive(t, decisions, "some decisions committed and were replayed")
			require.Equal(t, n.ok, decisions, "every committed conditional append was replayed")
			above := "-"
			if lag < 0 {
				baseline = n.conflictRate()
			} else if baseline >= 0 {
				above = fmt.Sprintf("%.1f%%", 100*(n.conflictRate()-baseline))
			}
			t.Logf("%s: %d conditional appends, %d ok, %d conflicts (%.1f%%; above the primary's: %s), %d rejected by the decision, 0 lost decisions (%d replayed), in %v (shared, loaded machine)",
				name, n.attempts, n.ok, n.conflicts, 100*n.conflictRate(), above, n.rejected, decisions, time.Since(start).Round(time.Millisecond))
		})
	}
}

// Failover to a standby that was behind: the standby stops receiving WAL,
// the primary commits more events (lost with it), the primary crashes and
// the standby is promoted; it hands out the lost events' transaction ids
// again. A decision cursor taken on the old primary names a lost event:
// AppendIf after it must not count the new events (which sort before it) as
// seen. A cursor taken on the standby before the failover stays exact.
func TestStandbyFailoverCursors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pair, err := pgtest.StartPair(ctx, pgserver.Options{Settings: map[string]string{"synchronous_commit": "on"}},
		pgserver.StandbyOptions{ApplyDelay: 500 * time.Millisecond})
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip(err)
	}
	require.NoError(t, err)
	defer pair.Close()
	onPrimary, onStandby, pp, _ := standbyStores(t, pair, &eventstore.Config{NotifyDisabled: true})
	q := query.Tagged(nil, "seat=s1")
	_, err = onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatOffered", nil, "seat=s1")})
	require.NoError(t, err)
	require.NoError(t, pair.Sync(ctx))
	_, onStandbyCur, err := onStandby.ReadAll(ctx, q, nil)
	require.NoError(t, err)

	// The standby stops receiving: what the primary commits now is lost.
	sc, err := pgx.Connect(ctx, pair.Standby.DSN())
	require.NoError(t, err)
	_, err = sc.Exec(ctx, `ALTER SYSTEM SET primary_conninfo = ''`)
	require.NoError(t, err)
	_, err = sc.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	sc.Close(ctx)
	require.Eventually(t, func() bool {
		var n int
		return pp.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication`).Scan(&n) == nil && n == 0
	}, time.Minute, 20*time.Millisecond, "the walsender is gone")
	for i := range 20 {
		_, err = onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Lost", i, "other=o1")})
		require.NoError(t, err)
	}
	_, err = onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", "lost", "seat=s1")})
	require.NoError(t, err)
	lostEvs, onOldPrimary, err := onPrimary.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, lostEvs, 2)

	require.NoError(t, pair.Primary.Crash(ctx))
	require.NoError(t, pair.Standby.Promote(ctx))
	np, err := pgtest.NewPool(ctx, pair.Standby.DSN())
	require.NoError(t, err)
	defer np.Close()
	s, err := eventstore.New(np, &eventstore.Config{Schema: onPrimary.Schema(), NotifyDisabled: true})
	require.NoError(t, err)
	defer s.Close(context.Background())
	evs, _, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, evs, 1, "the promoted standby lacks the lost event")

	// A new matching event on the new primary takes an id the old primary
	// had used: it sorts before the old primary's cursor.
	res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", "new", "seat=s1")})
	require.NoError(t, err)
	t.Logf("old primary's cursor at transaction %d; the new event got %d", onOldPrimary.TransactionID, res.TransactionID)
	require.Less(t, res.TransactionID, onOldPrimary.TransactionID, "the failover hands out the old ids again (the test's premise)")

	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", "old-primary-cursor", "seat=s1")},
		appendif.FailIf(q, &onOldPrimary))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "a cursor naming a lost event proves nothing seen")
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", "standby-cursor", "seat=s1")},
		appendif.FailIf(q, &onStandbyCur))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "a standby cursor from before the failover: the new event is unseen")
	// A fresh decision on the new primary works.
	_, cur, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatReleased", nil, "seat=s1")}, appendif.FailIf(q, &cur))
	require.NoError(t, err)
}

// Read-your-writes across the pair: with reads on a standby 300 ms behind,
// WaitFor the append's cursor returns once a read there shows the event.
func TestStandbyWaitForOwnWrite(t *testing.T) {
	pair := pgtest.StandbyPair(t)
	_, onStandby, _, _ := standbyStores(t, pair, nil)
	withApplyDelay(t, pair, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := query.Tagged(nil, "account=a1")
	start := time.Now()
	res, err := onStandby.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 10, "account=a1")})
	require.NoError(t, err)
	evs, _, err := onStandby.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	if time.Since(start) < 300*time.Millisecond {
		require.Empty(t, evs, "the standby has not applied the commit yet")
	}
	require.NoError(t, onStandby.WaitFor(ctx, res.Cursor()))
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "WaitFor waited for the replay")
	evs, _, err = onStandby.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, evs, 1, "after WaitFor the standby read shows the write")

	short, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	err = onStandby.WaitFor(short, cursor.Cursor{TransactionID: res.TransactionID + 1000, Position: 1 << 40})
	require.ErrorIs(t, err, context.DeadlineExceeded, "a deadline bounds the wait")
}

// Issue 36, part 1: after a promotion the new primary hands out both the
// transaction id and the position of an event the old primary wrote and the
// standby never received, so a different event sits at a lost event's
// (transaction id, position). The reproduction, step by step: append until
// the position sequence's next value is WAL-logged anew (log_cnt 0), so that
// the promoted standby resumes the sequence exactly after the last position
// it replayed; cut the standby off; on the old primary append the event that
// will be lost and decide after it; crash the primary and promote the
// standby; a fresh decision on the new primary lands at the lost event's
// point (the test's premise, checked). The old decision must then fail, and
// so must AppendIfs after the old primary's Head, ReadTail and append
// cursors: their event is not the one at that point now.
func TestStandbyFailoverSamePoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pair, err := pgtest.StartPair(ctx, pgserver.Options{Settings: map[string]string{"synchronous_commit": "on"}},
		pgserver.StandbyOptions{})
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip(err)
	}
	require.NoError(t, err)
	defer pair.Close()
	onPrimary, _, pp, _ := standbyStores(t, pair, &eventstore.Config{NotifyDisabled: true})
	course := query.Tagged(nil, "course=c1")
	seq := pgx.Identifier{onPrimary.Schema(), "events_position_seq"}.Sanitize()
	_, err = onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("CourseDefined", 3, "course=c1")})
	require.NoError(t, err)
	_, err = onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", "s1", "course=c1")})
	require.NoError(t, err)
	// 1. Append until the sequence's next value is WAL-logged anew (it logs
	// 32 values ahead), and let the standby replay it.
	for i := 0; ; i++ {
		var logCnt int64
		require.NoError(t, pp.QueryRow(ctx, `SELECT log_cnt FROM `+seq).Scan(&logCnt))
		if logCnt == 0 {
			break
		}
		require.Less(t, i, 200, "the position sequence's log_cnt never reached 0")
		_, err = onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Filler", i, "other=o1")})
		require.NoError(t, err)
	}
	require.NoError(t, pair.Sync(ctx))

	// 2. Cut the standby off.
	sc, err := pgx.Connect(ctx, pair.Standby.DSN())
	require.NoError(t, err)
	_, err = sc.Exec(ctx, `ALTER SYSTEM SET primary_conninfo = ''`)
	require.NoError(t, err)
	_, err = sc.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	sc.Close(ctx)
	require.Eventually(t, func() bool {
		var n int
		return pp.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication`).Scan(&n) == nil && n == 0
	}, time.Minute, 20*time.Millisecond, "the walsender is gone")

	// 3. On the old primary, the event that will be lost.
	lost, err := onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("CapacityChanged", 2, "course=c1")})
	require.NoError(t, err)
	// 4. Decisions and cursors on the old primary, after it.
	_, oldDecision, err := onPrimary.ReadAll(ctx, course, nil)
	require.NoError(t, err)
	oldHead, err := onPrimary.Head(ctx)
	require.NoError(t, err)
	tail, err := onPrimary.ReadTail(ctx, course, cursor.Start, 0)
	require.NoError(t, err)
	for name, c := range map[string]cursor.Cursor{"ReadAll": oldDecision, "Head": oldHead, "ReadTail": tail.Cursor, "Append": lost.Cursor()} {
		require.Equal(t, [2]any{lost.TransactionID, lost.Positions[0]}, [2]any{c.TransactionID, c.Position}, "the %s cursor names the lost event", name)
		require.NotZero(t, c.EventTime, "the %s cursor carries the event's time", name)
		t.Logf("%s cursor %s (%d characters)", name, c, len(c.String()))
	}

	// 5. Crash the primary, promote the standby.
	require.NoError(t, pair.Primary.Crash(ctx))
	require.NoError(t, pair.Standby.Promote(ctx))
	np, err := pgtest.NewPool(ctx, pair.Standby.DSN())
	require.NoError(t, err)
	defer np.Close()
	s, err := eventstore.New(np, &eventstore.Config{Schema: onPrimary.Schema(), NotifyDisabled: true})
	require.NoError(t, err)
	defer s.Close(context.Background())

	// 6. A fresh decision on the new primary lands where the lost event was.
	evs, fresh, err := s.ReadAll(ctx, course, nil)
	require.NoError(t, err)
	require.Len(t, evs, 2, "the promoted standby lacks the lost event")
	now, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", "s2", "course=c1")}, appendif.FailIf(course, &fresh))
	require.NoError(t, err)
	if now.TransactionID != lost.TransactionID || now.Positions[0] != lost.Positions[0] {
		t.Fatalf("premise not reached: the new primary's event is at (%d, %d), the lost one was at (%d, %d); "+
			"the test shows nothing unless they are the same point", now.TransactionID, now.Positions[0], lost.TransactionID, lost.Positions[0])
	}
	t.Logf("the lost event and the new primary's event are both at (%d, %d)", now.TransactionID, now.Positions[0])

	// 7. Every old cursor now names a point that holds another event: the
	// decisions after them fail. AppendIf on the store's connections (the
	// group commit path) and AppendIfTx (pgx's encoding) alike.
	for name, c := range map[string]cursor.Cursor{"ReadAll": oldDecision, "Head": oldHead, "ReadTail": tail.Cursor, "Append": lost.Cursor()} {
		_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", "s3", "course=c1")}, appendif.FailIf(course, &c))
		require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "an AppendIf after the old primary's %s cursor commits blind", name)
		tx, err := np.Begin(ctx)
		require.NoError(t, err)
		_, err = s.AppendIfTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", "s3", "course=c1")}, appendif.FailIf(course, &c))
		require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "an AppendIfTx after the old primary's %s cursor commits blind", name)
		require.NoError(t, tx.Rollback(ctx))
		// The same cursor sent through its text form (an ETag, a client).
		back, err := cursor.Parse(c.String())
		require.NoError(t, err)
		_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", "s3", "course=c1")}, appendif.FailIf(course, &back))
		require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "%s cursor through its text", name)
	}
	// A cursor encoded before the event time existed (version 1) proves
	// only that some event is at its point (docs/REPLICAS.md, "Failover"):
	// the negative control, it commits blind here.
	v1 := oldDecision
	v1.EventTime = 0
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", "s3", "course=c1")}, appendif.FailIf(course, &v1))
	require.NoError(t, err, "a version 1 cursor passes the probe on the event now at its point")
}

// openSeatTrap opens the trap on the primary: a transaction that appended a
// SeatTaken for seat s1 and stays open (its id x), then a later, committed
// transaction, so that the standby's snapshot spans x; the standby has
// replayed both. The open transaction is rolled back when the test ends.
func openSeatTrap(ctx context.Context, t *testing.T, pair *pgtest.Pair, onPrimary *eventstore.Store, pp *pgxpool.Pool) (open pgx.Tx, x uint64) {
	t.Helper()
	open, err := pp.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = open.Rollback(context.WithoutCancel(ctx)) })
	_, err = onPrimary.AppendTx(ctx, open, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", nil, "seat=s1")})
	require.NoError(t, err)
	require.NoError(t, open.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&x))
	_, err = onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", nil, "other=o1")})
	require.NoError(t, err)
	require.NoError(t, pair.Sync(ctx))
	return open, x
}
