package eventstore_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/appendif"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// TestCheckPlansStayOnIndexes captures, with auto_explain, the plans of the
// statements inside append_events and fails if a check scans the whole table.
// 50k events by default (the data is loaded in one transaction, the shape
// that once made the check scan every row); PGDCB_EXPLAIN=1 uses 1M and logs
// every plan.
func TestCheckPlansStayOnIndexes(t *testing.T) {
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
	// An old decision: its cursor is the log's first event.
	_, old, err := s.ReadAll(ctx, query.All(), &eventstore.ReadOptions{Limit: 1})
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
		// PL/pgSQL plans a cached statement for its first five runs with the
		// values at hand, then may switch to a generic plan: check the seventh.
		for range 7 {
			mu.Lock()
			plans = nil
			mu.Unlock()
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			_, err = c.store.AppendIfTx(ctx, tx, []eventstore.Event{eventstore.MustEvent("Deposited", 1, c.tag)}, c.cond)
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr, c.name)
			} else {
				require.NoError(t, err, c.name)
			}
			require.NoError(t, tx.Rollback(ctx))
		}
		mu.Lock()
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
		mu.Unlock()
		require.True(t, found, "%s: no check plan captured", c.name)
	}
}

// TestReadLastPlanUsesTheTagIndex: the newest events with a tag are found
// through the tag index and a top-N sort, never by walking the log backwards
// (the planner chose that walk whenever the statistics sample overrated a tag,
// and it then read most of the table). The trap is set here on purpose: a tag
// carried by a fifth of the events, all of them old.
func TestReadLastPlanUsesTheTagIndex(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t, nil)
	_, err := pool.Exec(ctx, `INSERT INTO `+s.QuotedSchema()+`.events (type, tags, data)
		SELECT 'E', CASE WHEN g < 4000 THEN ARRAY['kind=old', 'n=' || g] ELSE ARRAY['n=' || g] END, '{}'
		  FROM generate_series(0, 19999) AS g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE "+s.QuotedSchema()+".events")
	require.NoError(t, err)
	sql, a := eventstore.ReadSQL(s, query.Tagged(nil, "kind=old"), eventstore.ReadOptions{Backwards: true, Limit: 1})
	// Reads are prepared statements: check the custom plan and the generic
	// one PostgreSQL switches to after five runs.
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SET plan_cache_mode = "+mode)
		require.NoError(t, err)
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, a...)
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
		conn.Release()
		text := strings.Join(plan, "\n")
		require.Contains(t, text, "events_tags", "%s:\n%s", mode, text)
		require.NotRegexp(t, `Index (Only )?Scan Backward using events_log_order on events e\b`, text, mode)
	}

	last, _, err := s.ReadLast(ctx, query.Tagged(nil, "kind=old"))
	require.NoError(t, err)
	require.Equal(t, "n=3999", last.Tags.Strings()[1])
}
