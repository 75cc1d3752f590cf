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

	"github.com/pgdcb/pgdcb/appendif"
	"github.com/pgdcb/pgdcb/cursor"
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
		SET auto_explain.log_level = notice; SET auto_explain.log_analyze = on`)
	require.NoError(t, err)

	rare := query.Tagged(nil, "account=777") // 50 events
	hot := query.Tagged(nil, "shard=3")      // size/16 events
	head, err := s.Head(ctx)
	require.NoError(t, err)
	type checkCase struct {
		name  string
		q     query.Query
		cur   *cursor.Cursor
		tag   string
		store *eventstore.Store
	}
	cases := []checkCase{
		{"rare tag, cursor at head", rare, &head, "account=777", nil},
		{"hot tag, cursor at head", hot, &head, "shard=3", nil},
		{"new tag, no cursor", query.Tagged(nil, "account=new"), nil, "account=new", nil},
		{"type only, no cursor", query.New(query.Item{Types: []string{"Nope"}}), nil, "account=778", nil},
		{"type only, cursor at head", query.New(query.Item{Types: []string{"Deposited"}}), &head, "account=779", nil},
	}
	// A small log, where a LIMIT 1 sequential scan looks cheap to the planner.
	small, smallPool := newStore(t, nil)
	loadEvents(t, small, smallPool, 5_000)
	for i := range cases {
		cases[i].store = s
	}
	cases = append(cases,
		checkCase{"small log, absent tag, no cursor", query.Tagged(nil, "account=absent"), nil, "account=absent", small},
		checkCase{"small log, absent type+tag, no cursor", query.Tagged([]string{"Deposited"}, "shard=99"), nil, "shard=99", small},
	)
	for _, c := range cases {
		mu.Lock()
		plans = nil
		mu.Unlock()
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = c.store.AppendIfTx(ctx, tx, []eventstore.Event{eventstore.MustEvent("Deposited", 1, c.tag)}, appendif.FailIf(c.q, c.cur))
		require.NoError(t, err, c.name)
		require.NoError(t, tx.Rollback(ctx))
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
