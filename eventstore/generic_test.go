package eventstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// TestReadsFromTheStartAreNotCompiledNorGathered: a read from the start
// (ReadAll, ReadLast, Project) is never JIT-compiled nor run by parallel
// workers, whatever the server's settings. The connections here compile
// every plan and make parallel workers free (jit_above_cost = 0 and
// parallel costs 0: how such a read's generic plan is costed at 10^7 and
// 10^8 events, where either took many times the read; docs/SCALE.md), and
// auto_explain reports each plan; none of these reads may carry JIT or a
// Gather, on the pool or in a caller's transaction, whose settings the
// read leaves as it found them.
func TestReadsFromTheStartAreNotCompiledNorGathered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	loadEntities(t, s, pool, 2_000, 10)

	var mu sync.Mutex
	var plans []string
	cfg := pool.Config().Copy()
	cfg.MaxConns = 2
	for k, v := range map[string]string{"jit_above_cost": "0", "parallel_setup_cost": "0", "parallel_tuple_cost": "0",
		"min_parallel_table_scan_size": "0", "min_parallel_index_scan_size": "0"} {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;
			SET auto_explain.log_level = notice; SET auto_explain.log_analyze = on;
			SET auto_explain.log_settings = on`)
		return err
	}
	jitPool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer jitPool.Close()
	js, err := eventstore.New(jitPool, &eventstore.Config{Schema: s.Schema()})
	require.NoError(t, err)
	defer js.Close(ctx) //nolint:errcheck

	compiled := func() (n int, reads int) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range plans {
			if strings.Contains(p, "pg_current_snapshot()") {
				reads++
				// Settings: the planner's settings that differ from the
				// defaults, as the read was planned.
				if strings.Contains(p, "JIT:") || strings.Contains(p, "Gather") || !strings.Contains(p, "max_parallel_workers_per_gather = '0'") {
					n++
				}
			}
		}
		plans = nil
		return n, reads
	}
	// The test can fail: a plain statement on these connections is compiled
	// and gathered.
	var one int
	require.NoError(t, jitPool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{s.Schema(), "events"}.Sanitize()).Scan(&one))
	mu.Lock()
	can := len(plans) > 0 && strings.Contains(plans[len(plans)-1], "JIT:") && strings.Contains(plans[len(plans)-1], "Gather")
	plans = nil
	mu.Unlock()
	if !can {
		t.Skip("this server does not JIT-compile (no LLVM support) or gather: nothing to check")
	}

	entity := query.Tagged(nil, "account=7")
	model := pgdcb.NewModel(entity, 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
	// Seven of each: a prepared statement's sixth run may switch to its
	// generic plan.
	for range 7 {
		evs, _, err := js.ReadAll(ctx, entity, nil)
		require.NoError(t, err)
		require.Len(t, evs, 10)
		_, _, err = js.ReadLast(ctx, entity)
		require.NoError(t, err)
		model.State = 0
		_, err = js.Project(ctx, model)
		require.NoError(t, err)
		require.Equal(t, 10, model.State)
	}
	n, reads := compiled()
	require.GreaterOrEqual(t, reads, 21, "auto_explain reported the reads")
	require.Zero(t, n, "reads on the pool were compiled or gathered")

	tx, err := jitPool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, `SET LOCAL jit = on; SET LOCAL max_parallel_workers_per_gather = 3`)
	require.NoError(t, err)
	for range 7 {
		_, _, err := js.ReadAllTx(ctx, tx, entity, nil)
		require.NoError(t, err)
	}
	n, reads = compiled()
	require.GreaterOrEqual(t, reads, 7)
	require.Zero(t, n, "reads in a transaction were compiled or gathered")
	var jit, gather string
	require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('jit'), current_setting('max_parallel_workers_per_gather')`).Scan(&jit, &gather))
	require.Equal(t, "on", jit, "the read left the caller's jit setting changed")
	require.Equal(t, "3", gather, "the read left the caller's max_parallel_workers_per_gather changed")
}
