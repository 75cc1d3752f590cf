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
