package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/query"
)

// TestCheckPlansStayOnIndexes captures, with auto_explain, the plans of the
// statements inside append_events and fails if a check scans the whole table.
// 50k events by default (the data is loaded in one transaction, the shape
// that once made the check scan every row); PGDCB_EXPLAIN=1 uses 1M and logs
// every plan.
func TestCheckPlansStayOnIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	size := 50_000
	verbose := os.Getenv("PGDCB_EXPLAIN") != ""
	if verbose {
		size = 1_000_000
	}
	loadEvents(t, s, pool, size)

	var mu sync.Mutex
	var plans []string
	cfg := pool.Config().ConnConfig.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `LOAD 'auto_explain';
		SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
		SET auto_explain.log_level = notice; SET auto_explain.log_analyze = on;
		SET jit_above_cost = 0`) // as if the table were large enough for JIT (10M events)
	require.NoError(t, err)

	rare := query.Tagged(nil, "account=777") // 50 events
	hot := query.Tagged(nil, "shard=3")      // size/16 events
	head, err := s.Head(ctx)
	require.NoError(t, err)
	// The decision cycle's cursor: from the read of the entity itself.
	_, entityCur, err := s.ReadAll(ctx, rare, nil)
	require.NoError(t, err)
	// An old decision: its cursor is the log's first event.
	_, old, err := s.ReadAll(ctx, query.All(), &pgdcb.ReadOptions{Limit: 1})
	require.NoError(t, err)
	type checkCase struct {
		name    string
		cond    appendif.Condition
		tag     string
		store   *eventstore.Store
		index   string // the index the check must read
		wantErr error
	}
	cases := []checkCase{
		{name: "rare tag, cursor at head", cond: appendif.FailIf(rare, &head), tag: "account=777", index: "events_log_order"},
		{name: "rare tag, cursor of its read", cond: appendif.FailIf(rare, &entityCur), tag: "account=777", index: "events_log_order"},
		{name: "hot tag, cursor at head", cond: appendif.FailIf(hot, &head), tag: "shard=3", index: "events_log_order"},
		{name: "absent tag, old cursor", cond: appendif.FailIf(query.Tagged(nil, "account=new"), &old), tag: "account=new", index: "events_tags"},
		{name: "rare tag, old cursor", cond: appendif.FailIf(rare, &old), tag: "account=777", index: "events_tags", wantErr: pgdcb.ErrConditionFailed},
		{name: "new tag, no cursor", cond: appendif.FailIf(query.Tagged(nil, "account=new"), nil), tag: "account=new", index: "events_tags"},
		{name: "hot tag, no cursor", cond: appendif.FailIf(hot, nil), tag: "shard=3", index: "events_tags", wantErr: pgdcb.ErrConditionFailed},
		{name: "hot tag and type, idempotency", cond: appendif.Condition{}.WithIdempotency(query.Tagged([]string{"Nope"}, "shard=3")), tag: "shard=3", index: "events_type_log_order"},
		{name: "type only, no cursor", cond: appendif.FailIf(query.New(query.Item{Types: []string{"Nope"}}), nil), tag: "account=778", index: "events_type_log_order"},
		{name: "type only, cursor at head", cond: appendif.FailIf(query.New(query.Item{Types: []string{"Deposited"}}), &head), tag: "account=779", index: "events_log_order"},
	}
	// A small log, where a LIMIT 1 sequential scan looks cheap to the planner.
	small, smallPool := newStore(t, nil)
	loadEvents(t, small, smallPool, 5_000)
	for i := range cases {
		cases[i].store = s
	}
	cases = append(cases,
		checkCase{name: "small log, absent tag, no cursor", cond: appendif.FailIf(query.Tagged(nil, "account=absent"), nil), tag: "account=absent", store: small, index: "events_tags"},
		checkCase{name: "small log, absent type+tag, no cursor", cond: appendif.FailIf(query.Tagged([]string{"Deposited"}, "shard=99"), nil), tag: "shard=99", store: small, index: "events_"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// PL/pgSQL plans a cached statement for its first five runs with
			// the values at hand, then may switch to a generic plan: check the
			// seventh.
			for range 7 {
				mu.Lock()
				plans = nil
				mu.Unlock()
				tx, err := conn.Begin(ctx)
				require.NoError(t, err)
				_, err = c.store.AppendIfTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, c.tag)}, c.cond)
				if c.wantErr != nil {
					require.ErrorIs(t, err, c.wantErr, c.name)
				} else {
					require.NoError(t, err, c.name)
				}
				require.NoError(t, tx.Rollback(ctx))
			}
			mu.Lock()
			defer mu.Unlock()
			found := false
			for _, p := range plans {
				if !strings.Contains(p, "SELECT e.position") {
					continue
				}
				found = true
				if verbose {
					t.Logf("%s:\n%s", c.name, p)
				}
				require.NotContains(t, p, "Seq Scan", "%s: the check must use an index:\n%s", c.name, p)
				require.NotContains(t, p, "JIT", "%s: the check must not be compiled:\n%s", c.name, p)
				require.Contains(t, p, c.index, "%s: the check must read %s:\n%s", c.name, c.index, p)
			}
			require.True(t, found, "%s: no check plan captured", c.name)
		})
	}
}

// TestReadLastPlanUsesTheTagIndex: the newest events with a tag are found
// through the tag index and a top-N sort, never by walking the log backwards
// (the planner chose that walk whenever the statistics sample overrated a tag,
// and it then read most of the table). The trap is set here on purpose: a tag
// carried by a fifth of the events, all of them old.
func TestReadLastPlanUsesTheTagIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	_, err := pool.Exec(ctx, `INSERT INTO `+ident.Schema(s)+`.events (type, tags, data)
		SELECT 'E', CASE WHEN g < 4000 THEN ARRAY['kind=old', 'n=' || g] ELSE ARRAY['n=' || g] END, '{}'
		  FROM generate_series(0, 19999) AS g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE "+ident.Schema(s)+".events")
	require.NoError(t, err)
	sql, a := eventstore.ReadSQL(s, query.Tagged(nil, "kind=old"), pgdcb.ReadOptions{Backwards: true, Limit: 1})
	// Reads are prepared statements: check the custom plan and the generic
	// one PostgreSQL switches to after five runs.
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			text := explainIn(t, conn, mode, sql, a)
			conn.Release()
			require.Contains(t, text, "events_tags", "%s:\n%s", mode, text)
			require.NotRegexp(t, `Index (Only )?Scan Backward using events_log_order on events e\b`, text, mode)
		})
	}

	last, _, err := s.ReadLast(ctx, query.Tagged(nil, "kind=old"))
	require.NoError(t, err)
	require.Equal(t, "n=3999", last.Tags.Strings()[1])
}

// TestReadPlansAreGenericAndUseTheTagIndex: a read from the start with tag
// items (the decision read of an entity, and ReadLast) is planned once per
// connection, not at every call: after PostgreSQL's five custom plans its
// prepared statement runs on the generic plan, and that plan reads the tag
// index. Before the tags were passed through a one-row subquery, every call
// was planned again (planning was three quarters of the read's server CPU):
// generic_plans stayed 0.
func TestReadPlansAreGenericAndUseTheTagIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	loadEntities(t, s, pool, 20_000, 10)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, c := range []struct {
		name string
		q    func(i int) query.Query
		opts pgdcb.ReadOptions
		want int
	}{
		{name: "entity", q: func(i int) query.Query { return query.Tagged(nil, fmt.Sprintf("account=%d", i)) }, want: 10},
		{name: "two tags", q: func(i int) query.Query {
			return query.Tagged(nil, fmt.Sprintf("account=%d", i), fmt.Sprintf("shard=%d", i*10%16))
		}, want: 1},
		{name: "ReadLast", q: func(i int) query.Query { return query.Tagged(nil, fmt.Sprintf("account=%d", i)) }, opts: pgdcb.ReadOptions{Backwards: true, Limit: 1}, want: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range 8 {
				tx, err := conn.Begin(ctx)
				require.NoError(t, err)
				evs, _, err := s.ReadAllTx(ctx, tx, c.q(100+i), &c.opts)
				require.NoError(t, err, c.name)
				require.Len(t, evs, c.want, c.name)
				require.NoError(t, tx.Rollback(ctx))
			}
			sql, a := eventstore.ReadSQL(s, c.q(1), c.opts)
			requireGenericTagPlan(t, conn, sql, a)
		})
	}
}

// TestCheckSkipsInProgressTransactionsAfterTheCursor: a transaction in
// progress at the decision whose id sorts after the cursor needs no arm of its
// own in the check (its events sort after the cursor, in the range already),
// so the check is one range of events_log_order, not a BitmapOr with an arm
// per such transaction; and its event, committed later, still fails the
// condition.
func TestCheckSkipsInProgressTransactionsAfterTheCursor(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t, nil)
	loadEntities(t, s, pool, 5_000, 10)
	head, err := s.Head(ctx)
	require.NoError(t, err)

	// A transaction that is running at the decision, with an id after the
	// head's. The cursor's snapshot names it alone (other sessions on a
	// shared server would add their own).
	other, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	var xid uint64
	require.NoError(t, other.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xid))
	require.Greater(t, xid, head.TransactionID)
	cur := head
	cur.Snapshot = &cursor.Snapshot{Xmin: xid, Xmax: xid + 1, Xip: []uint64{xid}}

	var mu sync.Mutex
	var plans []string
	cfg := pool.Config().ConnConfig.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `LOAD 'auto_explain';
		SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
		SET auto_explain.log_level = notice; SET auto_explain.log_analyze = on`)
	require.NoError(t, err)
	q := query.Tagged(nil, "account=7")
	for range 7 { // the seventh run: after PL/pgSQL's custom plans
		mu.Lock()
		plans = nil
		mu.Unlock()
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = s.AppendIfTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, "account=7")}, appendif.FailIf(q, &cur))
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
	}
	mu.Lock()
	found := false
	for _, p := range plans {
		if strings.Contains(p, "SELECT e.position") {
			found = true
			require.Contains(t, p, "events_log_order", p)
			require.NotContains(t, p, "BitmapOr", "one range, no arm for a transaction after the cursor:\n%s", p)
		}
	}
	mu.Unlock()
	require.True(t, found, "no check plan captured")

	// Its event, committed after the decision, fails the condition.
	_, err = other.Exec(ctx, `INSERT INTO `+ident.Schema(s)+`.events (type, tags, data) VALUES ('Deposited', '{account=7}', '1')`)
	require.NoError(t, err)
	require.NoError(t, other.Commit(ctx))
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, "account=7")}, appendif.FailIf(q, &cur))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
}

// explainIn returns the plan of sql with args on conn under plan_cache_mode
// mode (force_custom_plan or force_generic_plan), one line per plan line,
// and resets the mode.
func explainIn(t *testing.T, conn *pgxpool.Conn, mode, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	_, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode)
	require.NoError(t, err)
	rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	_, err = conn.Exec(ctx, "RESET plan_cache_mode")
	require.NoError(t, err)
	return strings.Join(plan, "\n")
}

// requireGenericTagPlan fails unless the prepared statement sql has run
// with its generic plan on conn (PostgreSQL stopped planning it at every
// call) and that plan reads the tag index, never the whole table.
func requireGenericTagPlan(t *testing.T, conn *pgxpool.Conn, sql string, args []any) {
	t.Helper()
	var generic, custom int64
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, sql).Scan(&generic, &custom))
	require.Positive(t, generic, "every call was planned again (%d custom plans, no generic plan)", custom)
	text := explainIn(t, conn, "force_generic_plan", sql, args)
	require.Contains(t, text, "events_tags", "\n%s", text)
	require.NotContains(t, text, "Seq Scan on events", "\n%s", text)
}

// TestTypeStreamPlanUsesTheTypeIndex: a read of one event type (a type
// stream, the bench's read/type-stream) reads events_type_log_order, not the
// whole table in log order, in both the custom and the generic plan. It is
// the read that index exists for (bench/PROFILE.md, "The targets against
// their bounds": the index set keeps it).
func TestTypeStreamPlanUsesTheTypeIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	_, err := pool.Exec(ctx, `INSERT INTO `+ident.Schema(s)+`.events (type, tags, data)
		SELECT CASE WHEN g % 100 = 0 THEN 'Rare' ELSE 'Common' END, ARRAY['n=' || g], '{}'
		  FROM generate_series(0, 19999) AS g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE "+ident.Schema(s)+".events")
	require.NoError(t, err)
	q := query.New(query.Item{Types: []string{"Rare"}})
	sql, a := eventstore.ReadSQL(s, q, pgdcb.ReadOptions{})
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			text := explainIn(t, conn, mode, sql, a)
			conn.Release()
			require.Contains(t, text, "events_type_log_order", "%s:\n%s", mode, text)
			require.NotContains(t, text, "Seq Scan", "%s:\n%s", mode, text)
		})
	}
	n := 0
	for e, err := range s.Read(ctx, q, nil).All() {
		require.NoError(t, err)
		require.Equal(t, "Rare", e.Type)
		n++
	}
	require.Equal(t, 200, n)
}

// TestSettleLookupPlanUsesTheIdIndex: settling a call after a lost
// connection finds its first event by id through events_event_id, then the
// rest of its transaction by an index range from there, never by scanning
// the table (a settle runs while the pool is recovering from a restart or a
// crash: it must cost a few index probes whatever the log's size).
func TestSettleLookupPlanUsesTheIdIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	_, err := pool.Exec(ctx, `INSERT INTO `+ident.Schema(s)+`.events (type, tags, data, event_id)
		SELECT 'E', ARRAY['n=' || g], '{}', CASE WHEN g % 2 = 0 THEN gen_random_uuid() END
		  FROM generate_series(0, 19999) AS g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE "+ident.Schema(s)+".events")
	require.NoError(t, err)
	var id string
	require.NoError(t, pool.QueryRow(ctx, `SELECT event_id::text FROM `+ident.Schema(s)+`.events WHERE event_id IS NOT NULL LIMIT 1`).Scan(&id))
	args := []any{[]string{id, "00000000-0000-7000-8000-000000000001"}, []int32{1, 3}}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			text := explainIn(t, conn, mode, eventstore.SettleLookupSQL(s), args)
			conn.Release()
			require.Contains(t, text, "events_event_id", "%s:\n%s", mode, text)
			require.NotContains(t, text, "Seq Scan", "%s:\n%s", mode, text)
		})
	}
	// The statement runs and finds the stored call, not the absent one.
	rows, err := pool.Query(ctx, eventstore.SettleLookupSQL(s), args...)
	require.NoError(t, err)
	var found []int64
	for rows.Next() {
		var (
			i   int64
			tx  uint64
			pos []int64
			ty  []string
			ids []any
			at  time.Time
		)
		require.NoError(t, rows.Scan(&i, &tx, &pos, &ty, &ids, &at))
		found = append(found, i)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{1}, found)
}
