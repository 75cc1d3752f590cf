package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
)

// groupStore returns a store with group commit over a pool of ONE connection
// (and one sender), in a migrated schema: holding that connection makes calls
// queue, so that releasing it sends them all as one group.
func groupStore(t *testing.T, tune ...func(*eventstore.Config)) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	return groupStoreOn(t, nil, tune...)
}

// groupStoreOn is groupStore with poolTune applied to the pool's
// configuration (nil: none).
func groupStoreOn(t *testing.T, poolTune func(*pgxpool.Config), tune ...func(*eventstore.Config)) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	base, _ := newStore(t, nil)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	if poolTune != nil {
		poolTune(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c := eventstore.Config{Schema: base.Schema(), GroupSenders: 1, NotifyDisabled: true}
	for _, f := range tune {
		f(&c)
	}
	s, err := eventstore.New(pool, &c)
	require.NoError(t, err)
	return s, pool
}

// awaitGroup waits until cond holds, checking it at every change of s's queue,
// senders or gates (a signal, not a poll), and fails the test if it does not
// within a generous deadline.
func awaitGroup(t *testing.T, s *eventstore.Store, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, eventstore.AwaitGroupState(ctx, s, cond), what)
}

// startBlocker starts a call that takes the store's only sender place and
// waits for its connection (held by the test): the calls made after it
// queue. wait waits for it to end.
func startBlocker(t *testing.T, s *eventstore.Store) (wait func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(context.Background(), []pgdcb.Event{pgdcb.MustEvent("Blocker", 0, "blocker=1")})
		done <- err
	}()
	awaitGroup(t, s, "the blocker did not start", func() bool { return eventstore.GroupSenders(s) >= 1 })
	return func() { require.NoError(t, <-done) }
}

// inOneGroup runs n calls with the store's only connection held until all n
// are queued, so that they are sent as ONE group; it checks that they were.
func inOneGroup(t *testing.T, s *eventstore.Store, pool *pgxpool.Pool, n int, call func(i int) (pgdcb.AppendResult, error)) ([]pgdcb.AppendResult, []error) {
	t.Helper()
	ctx := context.Background()
	// The previous round's sender may still be ending (it leaves once it
	// finds the queue empty): the blocker must find no sender at work, or it
	// queues and joins the group instead of holding the sender's place.
	awaitGroup(t, s, "the previous sender did not end", func() bool { return eventstore.GroupSenders(s) == 0 })
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	blocker := startBlocker(t, s)
	defer blocker()
	before := s.GroupStats()
	res := make([]pgdcb.AppendResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { res[i], errs[i] = call(i) })
	}
	awaitGroup(t, s, "calls did not queue", func() bool { return eventstore.QueuedAppends(s) >= n })
	conn.Release()
	wg.Wait()
	after := s.GroupStats()
	require.Equal(t, before.Groups+1, after.Groups, "one group sent")
	require.Equal(t, before.Grouped+int64(n), after.Grouped, "all %d calls in it", n)
	return res, errs
}

// queueInOrder starts the calls one at a time, each once the previous one
// is queued, while conn (the store's only connection) is held and a blocker
// holds the sender's place; then releases conn: the calls are sent as ONE
// group, in this order, which it checks.
func queueInOrder(t *testing.T, s *eventstore.Store, conn *pgxpool.Conn, calls []func() (pgdcb.AppendResult, error)) ([]pgdcb.AppendResult, []error) {
	t.Helper()
	errs := make([]error, len(calls))
	res := make([]pgdcb.AppendResult, len(calls))
	var wg sync.WaitGroup
	before := s.GroupStats()
	for i, call := range calls {
		wg.Go(func() { res[i], errs[i] = call() })
		awaitGroup(t, s, fmt.Sprintf("call %d did not queue", i), func() bool { return eventstore.QueuedAppends(s) >= i+1 })
	}
	conn.Release()
	wg.Wait()
	require.Equal(t, before.Groups+1, s.GroupStats().Groups, "one group")
	return res, errs
}

// orDecision is stored in each conditional event: the cursor it decided at
// and its condition (tags, each one item, OR-ed).
type orDecision struct {
	Cursor string   `json:"cursor"`
	Tags   []string `json:"tags"`
}

// verifyORDecisions replays the whole log: for every committed conditional
// event E (an orDecision), every event matching E's condition that E's cursor
// did not see sorts after E (it was appended after E: in a later transaction
// or later in E's own group). Returns how many decisions it checked.
func verifyORDecisions(t *testing.T, s *eventstore.Store) int {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), query.All(), nil)
	require.NoError(t, err)
	checked := 0
	for _, e := range evs {
		var rec orDecision
		if json.Unmarshal(e.Data, &rec) != nil || rec.Cursor == "" {
			continue
		}
		cur, err := cursor.Parse(rec.Cursor)
		require.NoError(t, err)
		q := orQuery(rec.Tags)
		checked++
		for _, f := range evs {
			if f.Position == e.Position || cur.Seen(f.TransactionID, f.Position) || !q.Matches(f.Type, f.Tags) {
				continue
			}
			require.Positive(t, cursor.Compare(f.TransactionID, f.Position, e.TransactionID, e.Position),
				"conditional event %d (tx %d) committed over event %d (tx %d) that its decision did not see",
				e.Position, e.TransactionID, f.Position, f.TransactionID)
		}
	}
	return checked
}

func orQuery(tagList []string) query.Query {
	q := query.Tagged(nil, tagList[0])
	for _, tg := range tagList[1:] {
		q = q.Or(query.Tagged(nil, tg))
	}
	return q
}

// N conditional appends after the same cursor on the same boundary, in ONE
// group: exactly one commits (a later member sees the earlier one's event).
func TestGroupSameBoundaryOneGroup(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	for r := range 5 {
		tag := fmt.Sprintf("account=a%d", r)
		q := query.Tagged(nil, tag)
		_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", 0, tag)})
		require.NoError(t, err)
		_, cur, err := s.ReadAll(ctx, q, nil)
		require.NoError(t, err)
		_, errs := inOneGroup(t, s, pool, 8, func(i int) (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{
				pgdcb.MustEvent("Withdrawn", orDecision{Cursor: cur.String(), Tags: []string{tag}}, tag),
			}, appendif.FailIf(q, &cur))
		})
		ok, conflict, dup := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d", r)
		require.Equal(t, 7, conflict, "round %d", r)
		require.Zero(t, dup)
		require.Equal(t, 2, countEvents(t, s, q))
	}
	require.Equal(t, 5, verifyORDecisions(t, s))
}

// The same idempotency query in every member of one group: exactly one.
func TestGroupIdempotencyOneGroup(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	for r := range 5 {
		token := fmt.Sprintf("idempotency_token=t%d", r)
		idem := query.Tagged([]string{"OrderPlaced"}, token)
		_, errs := inOneGroup(t, s, pool, 8, func(i int) (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{
				pgdcb.MustEvent("OrderPlaced", map[string]int{"racer": i}, token, fmt.Sprintf("order=o%d-%d", r, i)),
			}, appendif.Condition{Idempotency: idem})
		})
		ok, conflict, dup := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d", r)
		require.Equal(t, 7, dup, "round %d", r)
		require.Zero(t, conflict)
		require.Equal(t, 1, countEvents(t, s, idem))
	}
}

// Members share the group's transaction id; each gets its own positions, in
// one ascending run per member.
func TestGroupSharesTransaction(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	res, errs := inOneGroup(t, s, pool, 6, func(i int) (pgdcb.AppendResult, error) {
		evs := []pgdcb.Event{pgdcb.MustEvent("A", i, fmt.Sprintf("m=%d", i))}
		if i%2 == 0 {
			evs = append(evs, pgdcb.MustEvent("B", i, fmt.Sprintf("m=%d", i)))
			return s.Append(ctx, evs)
		}
		return s.AppendIf(ctx, evs, appendif.FailIf(query.Tagged(nil, fmt.Sprintf("m=%d", i)), nil))
	})
	seen := map[int64]bool{}
	for i := range res {
		require.NoError(t, errs[i])
		require.Equal(t, res[0].TransactionID, res[i].TransactionID)
		require.Len(t, res[i].Positions, 1+(1-i%2))
		for j, p := range res[i].Positions {
			require.False(t, seen[p])
			seen[p] = true
			if j > 0 {
				require.Equal(t, res[i].Positions[j-1]+1, p)
			}
		}
		evs, _, err := s.ReadAll(ctx, query.Tagged(nil, fmt.Sprintf("m=%d", i)), nil)
		require.NoError(t, err)
		require.Len(t, evs, len(res[i].Positions))
		for j, e := range evs {
			require.Equal(t, res[i].Positions[j], e.Position)
			require.Equal(t, res[i].TransactionID, e.TransactionID)
		}
	}
}

// Overlapping OR-items and mixed conditional/unconditional members, in one
// group and racing freely: the replay finds no decision lost, and in one
// group the outcomes are those of running the members one after another.
func TestGroupOverlappingOrMixed(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	for r := range 8 {
		tg := func(x string) string { return fmt.Sprintf("k=%s%d", x, r) }
		a, b, c := tg("a"), tg("b"), tg("c")
		sets := [][]string{{a, b}, {b, c}, {c, a}, {a}, {c}}
		_, cur, err := s.ReadAll(ctx, orQuery([]string{a, b, c}), nil)
		require.NoError(t, err)
		_, errs := inOneGroup(t, s, pool, 10, func(i int) (pgdcb.AppendResult, error) {
			if i%4 == 3 { // unconditional, on one tag
				return s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Plain", i, []string{a, b, c}[i%3])})
			}
			set := sets[i%len(sets)]
			return s.AppendIf(ctx, []pgdcb.Event{
				pgdcb.MustEvent("Decided", orDecision{Cursor: cur.String(), Tags: set}, set[0]),
			}, appendif.FailIf(orQuery(set), &cur))
		})
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
			}
		}
	}
	require.Positive(t, verifyORDecisions(t, s))

	// Free race with grouping on (default senders, shared pool).
	fs := groupedStore(t)
	for r := range 10 {
		tg := func(x string) string { return fmt.Sprintf("k=%s%d", x, r) }
		a, b, c := tg("a"), tg("b"), tg("c")
		sets := [][]string{{a, b}, {b, c}, {c, a}, {a}, {b}}
		errs := race(16, func(i int) func() error {
			if i%4 == 3 {
				return func() error {
					_, err := fs.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Plain", i, []string{a, b, c}[i%3])})
					return err
				}
			}
			set := sets[i%len(sets)]
			_, cur, err := fs.ReadAll(ctx, orQuery(set), nil)
			return func() error {
				if err != nil {
					return err
				}
				_, err := fs.AppendIf(ctx, []pgdcb.Event{
					pgdcb.MustEvent("Decided", orDecision{Cursor: cur.String(), Tags: set}, set[0]),
				}, appendif.FailIf(orQuery(set), &cur))
				if errors.Is(err, pgdcb.ErrConditionFailed) {
					return nil
				}
				return err
			}
		})
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
	require.Positive(t, verifyORDecisions(t, fs))
	st := fs.GroupStats()
	t.Logf("free race: %+v", st)
}

// A member of a group whose sequential predecessor in the same group commits
// an event its condition matches fails; one whose predecessors do not
// commits. Deterministic: the order of the members is forced (each call is
// queued before the next starts).
func TestGroupMembersSeeEarlierMembers(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	q := query.Tagged(nil, "slot=s1")
	_, cur, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer startBlocker(t, s)()
	calls := []func() (pgdcb.AppendResult, error){
		// 1. takes the slot (no conflict before it).
		func() (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Taken", 1, "slot=s1")}, appendif.FailIf(q, &cur))
		},
		// 2. same decision: must see 1's event.
		func() (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Taken", 2, "slot=s1")}, appendif.FailIf(q, &cur))
		},
		// 3. idempotency on 1's event type and tag, no cursor: must see it.
		func() (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Taken", 3, "slot=s2")},
				appendif.Condition{Idempotency: query.Tagged([]string{"Taken"}, "slot=s1")})
		},
		// 4. "no event at all with slot=s1" without cursor: must see it.
		func() (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Taken", 4, "slot=s3")}, appendif.FailIf(q, nil))
		},
		// 5. an unrelated boundary: commits.
		func() (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Taken", 5, "slot=s4")},
				appendif.FailIf(query.Tagged(nil, "slot=s4"), &cur))
		},
	}
	res, errs := queueInOrder(t, s, conn, calls)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], pgdcb.ErrConditionFailed)
	var cf *appendif.ConditionFailedError
	require.ErrorAs(t, errs[1], &cf)
	require.Equal(t, res[0].Positions[0], cf.ConflictPosition)
	require.ErrorIs(t, errs[2], pgdcb.ErrIdempotent)
	var ie *appendif.IdempotentError
	require.ErrorAs(t, errs[2], &ie)
	require.Equal(t, res[0].Positions[0], ie.ExistingPosition)
	require.ErrorIs(t, errs[3], pgdcb.ErrConditionFailed)
	require.NoError(t, errs[4])
	require.Equal(t, res[0].TransactionID, res[4].TransactionID)
	require.Equal(t, 1, countEvents(t, s, q))
}

// A duplicate event id in one member aborts the group's transaction; the
// other members are retried alone and commit, the duplicate fails as alone.
func TestGroupDuplicateIDDoesNotFailOthers(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	dup := pgdcb.MustEvent("Stored", 0, "dup=1")
	dup.ID = uuid.New()
	_, err := s.Append(ctx, []pgdcb.Event{dup})
	require.NoError(t, err)
	before := s.GroupStats()
	_, errs := inOneGroup(t, s, pool, 6, func(i int) (pgdcb.AppendResult, error) {
		if i == 2 {
			return s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", i, "m=x"), dup})
		}
		return s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", i, fmt.Sprintf("m=%d", i))},
			appendif.FailIf(query.Tagged(nil, fmt.Sprintf("m=%d", i)), nil))
	})
	for i, err := range errs {
		if i == 2 {
			require.Error(t, err)
			require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
			continue
		}
		require.NoError(t, err, "member %d", i)
	}
	require.Equal(t, before.Retried+6, s.GroupStats().Retried)
	require.Equal(t, 0, countEvents(t, s, query.Tagged(nil, "m=x")))
	require.Equal(t, 5, countEvents(t, s, query.Tagged([]string{"Other"})))
}

// A free race of conditional appends on one boundary with grouping on
// (shared pool, default senders): the counter loses no decision.
func TestGroupRaceSameBoundary(t *testing.T) {
	ctx := context.Background()
	s := groupedStore(t)
	for r := range 15 {
		tag := fmt.Sprintf("counter=c%d", r)
		q := query.Tagged(nil, tag)
		errs := race(16, func(i int) func() error {
			_, cur, err := s.ReadAll(ctx, q, nil)
			return func() error {
				if err != nil {
					return err
				}
				_, err := s.AppendIf(ctx, []pgdcb.Event{
					pgdcb.MustEvent("Decided", orDecision{Cursor: cur.String(), Tags: []string{tag}}, tag),
				}, appendif.FailIf(q, &cur))
				return err
			}
		})
		ok, _, dup := outcomes(t, errs)
		require.Equal(t, 1, ok, "round %d: all decided on the empty boundary", r)
		require.Zero(t, dup)
	}
	require.Equal(t, 15, verifyORDecisions(t, s))
}

// A caller whose context ends while its append is queued gets a certain
// error and nothing is written for it.
func TestGroupQueuedContextEnds(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer startBlocker(t, s)()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = s.Append(cctx, []pgdcb.Event{pgdcb.MustEvent("Late", 0, "late=1")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
	conn.Release()
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("OnTime", 0, "late=2")})
	require.NoError(t, err)
	require.Equal(t, 0, countEvents(t, s, query.Tagged(nil, "late=1")))
}

// A group whose backend is terminated during its call. The group is held in
// flight by an event id that an open transaction inserted: its INSERT waits
// for that transaction (the unique index), the one wait a group's call can
// have (it never waits for a key: see TestGroupBusyKeyLeavesTheGroup).
// Settled (the default): every member is found absent (one lookup for the
// group) and sent again alone; the one with the held id succeeds once that
// transaction rolls back. Without settling: every member gets
// ErrOutcomeUnknown (none is retried: the group may have committed as far
// as the client can tell).
func TestGroupOutcomeUnknownForEveryMember(t *testing.T) {
	for _, settle := range []bool{true, false} {
		t.Run(map[bool]string{true: "settled", false: "SettleDisabled"}[settle], func(t *testing.T) {
			testGroupTerminated(t, settle)
		})
	}
}

func testGroupTerminated(t *testing.T, settle bool) {
	ctx := context.Background()
	s, pool := groupStore(t, func(c *eventstore.Config) { c.SettleDisabled = !settle })
	plain, err := eventstore.New(pgtest.Pool(t), &eventstore.Config{Schema: s.Schema()})
	require.NoError(t, err)
	dup := pgdcb.MustEvent("Deposited", 0, "acct=9")
	dup.ID = uuid.New()
	tx, err := plain.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = plain.AppendTx(ctx, tx, []pgdcb.Event{dup})
	require.NoError(t, err)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer startBlocker(t, s)()
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := pgdcb.MustEvent("Deposited", i, fmt.Sprintf("acct=x%d", i))
			if i == 0 {
				e = dup
			}
			_, errs[i] = s.Append(ctx, []pgdcb.Event{e})
		})
	}
	awaitGroup(t, s, "calls did not queue", func() bool { return eventstore.QueuedAppends(s) >= n })
	conn.Release()
	awaitServer(t, "the group never waited", func() bool {
		var k int
		require.NoError(t, plain.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '.append_group%'
			  AND pid <> pg_backend_pid()`, ident.Schema(s)).Scan(&k))
		return k > 0
	})
	if settle {
		// Every member found absent; they are sent again one by one, and the
		// one with the held event id waits for the open transaction.
		require.Eventually(t, func() bool { return s.SettleStats().Absent == n }, time.Minute, 5*time.Millisecond)
		require.NoError(t, tx.Rollback(ctx))
	}
	wg.Wait()
	for i, err := range errs {
		if settle {
			require.NoError(t, err, "member %d", i)
		} else {
			require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown, "member %d: %v", i, err)
		}
	}
	if settle {
		st := s.SettleStats()
		require.EqualValues(t, n, st.Absent, "%+v", st)
		require.EqualValues(t, n, st.Resent, "%+v", st)
		require.Equal(t, 1, countEvents(t, s, query.Tagged(nil, "acct=9")), "sent again once")
	}
	require.Zero(t, s.GroupStats().Retried)
	require.Equal(t, int64(1), s.GroupStats().Groups)
}

// awaitServer waits until cond (a question to the server) holds, and fails
// the test if it does not within a generous deadline.
func awaitServer(t *testing.T, what string, cond func() bool) {
	t.Helper()
	await.True(t, time.Minute, what, cond)
}

// Grouping never escalates a lock: a group stops before the union of its
// members' keys would pass MaxLockKeys (and before GroupMaxAppends).
func TestGroupSplitsAtLimits(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t, func(c *eventstore.Config) { c.MaxLockKeys = 6 })
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer startBlocker(t, s)()
	const n = 6 // keys: global, type, one tag each: 2+4 fit in 6
	errs := make([]error, n)
	res := make([]pgdcb.AppendResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res[i], errs[i] = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("T", i, fmt.Sprintf("k=%d", i))})
		})
	}
	awaitGroup(t, s, "calls did not queue", func() bool { return eventstore.QueuedAppends(s) >= n })
	conn.Release()
	wg.Wait()
	txs := map[uint64]int{}
	for i := range n {
		require.NoError(t, errs[i])
		txs[res[i].TransactionID]++
	}
	st := s.GroupStats()
	require.Equal(t, int64(4), st.MaxAppends, "%+v", st)
	require.Equal(t, int64(2), st.Groups, "a group of 4 and one of 2: %+v", st)
	require.Equal(t, int64(6), st.Grouped, "%+v", st)
	require.Len(t, txs, 2)

	s2, pool2 := groupStore(t, func(c *eventstore.Config) { c.GroupMaxAppends = 3 })
	_, _ = inOneGroup(t, s2, pool2, 3, func(i int) (pgdcb.AppendResult, error) {
		return s2.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("T", i, fmt.Sprintf("k=%d", i))})
	})
	require.Equal(t, int64(3), s2.GroupStats().MaxAppends)
}

// TestGroupStatsQueueWait: appends held in the queue for a known time are
// counted with their time queued (total, maximum, histogram), and appends per
// commit count the group and the call sent alone.
func TestGroupStatsQueueWait(t *testing.T) {
	s, pool := groupStore(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	before := s.GroupStats()
	blocker := startBlocker(t, s) // sent alone by its caller: never queued
	const n, hold = 4, 30 * time.Millisecond
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Queued", i, fmt.Sprintf("q=%d", i))})
			require.NoError(t, err)
		})
	}
	awaitGroup(t, s, "calls did not queue", func() bool { return eventstore.QueuedAppends(s) >= n })
	time.Sleep(hold)
	conn.Release()
	wg.Wait()
	blocker()

	st := s.GroupStats().Sub(before)
	require.Equal(t, int64(n), st.Queued, "%+v", st)
	require.GreaterOrEqual(t, st.MaxQueueWait, hold)
	require.GreaterOrEqual(t, st.QueueWait, n*hold)
	require.LessOrEqual(t, st.QueueWait, time.Duration(n)*st.MaxQueueWait)
	var counted int64
	for _, b := range st.QueueWaits {
		if b.Max < hold {
			require.Zero(t, b.Count, "no append waited at most %s", b.Max)
		}
		counted += b.Count
	}
	require.Equal(t, st.Queued, counted, "every queued append in one bucket")
	require.Equal(t, time.Duration(math.MaxInt64), st.QueueWaits[len(st.QueueWaits)-1].Max)
	require.Equal(t, int64(1), st.Alone)
	require.Equal(t, int64(1), st.Groups)
	require.Equal(t, int64(2), st.Commits())
	require.InDelta(t, float64(n+1)/2, st.AppendsPerCommit(), 1e-9)
}

// groupedStore is a store on a fresh schema with group commit on, whatever
// PGDCB_TEST_GROUP_COMMIT says (shared pool, default senders).
func groupedStore(t *testing.T) *eventstore.Store {
	t.Helper()
	base, pool := newStore(t, nil)
	s, err := eventstore.New(pool, &eventstore.Config{Schema: base.Schema()})
	require.NoError(t, err)
	return s
}
