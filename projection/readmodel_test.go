package projection_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// withTables is fast with the read model's tables (and views) registered.
func withTables(tables, views []string) *projection.Config {
	c := *fast
	c.Tables, c.Views = tables, views
	return &c
}

// caughtUpTo waits until r's read model holds the whole log.
func caughtUpTo(t *testing.T, s *eventstore.Store, r *projection.Runner) {
	t.Helper()
	last, _, err := s.ReadLast(context.Background(), query.All())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, r.WaitFor(ctx, cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}))
}

// A Reset by any tool (projection.Reset without a clear function, as the
// CLI calls it) empties the tables the runner registered, with the
// checkpoint: the read model is rebuilt exactly once (without the
// registration, every row would be there twice).
func TestResetEmptiesTheRegisteredTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	appendN(t, s, "P", 50, 10)
	r, err := projection.New(s, "p", query.Tagged([]string{"P"}), insertRows(ident.Schema(s)), withTables([]string{"rm"}, nil))
	require.NoError(t, err)
	start(t, r)
	caughtUpTo(t, s, r)
	st, err := projection.GetStatus(ctx, s, "p")
	require.NoError(t, err)
	require.Equal(t, []string{ident.Schema(s) + `."rm"`}, st.Tables)

	require.NoError(t, projection.Reset(ctx, s, "p", nil))
	appendN(t, s, "P", 10, 10)
	caughtUpTo(t, s, r)
	requireExactlyOnce(t, pool, s, 60)

	// A registered table that is gone: the reset is refused, nothing moved.
	_, err = pool.Exec(ctx, `ALTER TABLE `+ident.Schema(s)+`.rm RENAME TO rm_gone`)
	require.NoError(t, err)
	before, err := projection.GetStatus(ctx, s, "p")
	require.NoError(t, err)
	err = projection.Reset(ctx, s, "p", nil)
	require.ErrorContains(t, err, "does not exist")
	after, err := projection.GetStatus(ctx, s, "p")
	require.NoError(t, err)
	require.Equal(t, before.Cursor, after.Cursor)
}

func TestReadModelConfigRefused(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	for _, tc := range []struct {
		tables, views []string
		field         string
	}{
		{[]string{"a"}, []string{"v", "w"}, "Config.Views"},
		{nil, []string{"v"}, "Config.Views"},
		{[]string{"a.b.c"}, nil, "Config.Tables"},
		{[]string{""}, nil, "Config.Tables"},
		{[]string{"a", "a"}, nil, "Config.Tables"},
		{[]string{"a"}, []string{"a"}, "Config.Views"},
	} {
		_, err := projection.New(s, "p", query.All(), insertRows("x"), withTables(tc.tables, tc.views))
		var ia *pgdcb.InvalidArgumentError
		require.ErrorAs(t, err, &ia, "%v %v", tc.tables, tc.views)
		require.Equal(t, tc.field, ia.Name)
	}
}

// Switch's refusals: no checkpoint, no views, a new version not ACTIVE.
func TestSwitchRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	require.ErrorIs(t, projection.Switch(ctx, s, "nosuch"), projection.ErrNotFound)
	require.NoError(t, projection.Pause(ctx, s, "plain"))
	require.ErrorIs(t, projection.Switch(ctx, s, "plain"), pgdcb.ErrInvalidArgument)

	r, err := projection.New(s, "v1", query.Tagged([]string{"P"}), insertRows(ident.Schema(s)), withTables([]string{"rm"}, []string{"rmv"}))
	require.NoError(t, err)
	require.NoError(t, r.Reset(ctx)) // registers
	require.NoError(t, r.Pause(ctx))
	require.NoError(t, projection.Switch(ctx, s, "v1"), "serving already: nothing to wait for")
	_, err = s.Pool().Exec(ctx, `CREATE TABLE `+ident.Schema(s)+`.rm2 (LIKE `+ident.Schema(s)+`.rm)`)
	require.NoError(t, err)
	r2, err := projection.New(s, "v2", query.Tagged([]string{"P"}), insertRows(ident.Schema(s)), withTables([]string{"rm2"}, []string{"rmv"}))
	require.NoError(t, err)
	require.NoError(t, r2.Reset(ctx))
	require.NoError(t, r2.Pause(ctx))
	require.ErrorIs(t, projection.Switch(ctx, s, "v2"), projection.ErrNotActive)
}

// Logical decoding mode: a projection fed in commit order holds events
// beyond its log-order cursor while a transaction of the database stays
// open. A new version built with tail reads cannot pass that transaction, so
// Switch waits (it would otherwise show readers a model without events they
// saw); once the transaction ends, it switches, and the view holds every
// event once. A Reset of the logical projection empties its table too.
func TestSwitchFromALogicalProjection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := teststore.Logical(t, nil)
	schema := ident.Schema(s)
	for _, tbl := range []string{"rm", "rm2"} {
		_, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.`+tbl+` (position bigint NOT NULL, type text NOT NULL)`)
		require.NoError(t, err)
	}
	cfg := withTables([]string{"rm"}, []string{"rmv"})
	cfg.Logical = &logical.Config{}
	v1, err := projection.New(s, "v1", query.Tagged([]string{"P"}), insertRowsInto(schema, "rm"), cfg)
	require.NoError(t, err)
	start(t, v1)
	t.Cleanup(func() { _ = logical.DropSlot(context.Background(), pool, logical.SlotName(s.Schema(), "v1")) })
	appendN(t, s, "P", 5, 5)
	require.Eventually(t, func() bool { return count(t, pool, schema+".rmv") == 5 }, time.Minute, 10*time.Millisecond)

	// The read model rebuilds after a Reset, exactly once.
	require.NoError(t, projection.Reset(ctx, s, "v1", nil))
	require.Eventually(t, func() bool { return count(t, pool, schema+".rmv") == 5 }, time.Minute, 10*time.Millisecond)

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(context.Background())
	_, err = holder.Exec(ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)
	appendN(t, s, "P", 3, 3)
	require.Eventually(t, func() bool { return count(t, pool, schema+".rmv") == 8 }, time.Minute, 10*time.Millisecond,
		"logical decoding passes the open transaction")

	v2, err := projection.New(s, "v2", query.Tagged([]string{"P"}), insertRowsInto(schema, "rm2"), withTables([]string{"rm2"}, []string{"rmv"}))
	require.NoError(t, err)
	start(t, v2)
	require.Eventually(t, func() bool { return count(t, pool, schema+".rm2") == 5 }, time.Minute, 10*time.Millisecond)
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, projection.Switch(sctx, s, "v2"), context.DeadlineExceeded, "v2 lacks 3 events v1 shows")
	require.Equal(t, 8, count(t, pool, schema+".rmv"), "the view still shows v1")

	require.NoError(t, holder.Rollback(ctx))
	sctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, projection.Switch(sctx, s, "v2"))
	require.Equal(t, 8, count(t, pool, schema+".rmv"))
	var distinct int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT position) FROM `+schema+`.rmv`).Scan(&distinct))
	require.Equal(t, 8, distinct)
	st, err := projection.GetStatus(ctx, s, "v1")
	require.NoError(t, err)
	require.Equal(t, projection.Paused, st.State)
}

// count is rel's rows, -1 when it cannot be read (not created yet).
func count(t *testing.T, pool *pgxpool.Pool, rel string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+rel).Scan(&n); err != nil {
		return -1
	}
	return n
}

// A Reset of the new version that commits while Switch waits for the view's
// readers (past its catch-up check) is seen: Switch rolls back, the view
// stays over the live table with the old version serving it, and Switch
// waits until the new version has rebuilt. (Switch used to point the view at
// the emptied table and pause the old version.)
func TestSwitchRefusesAResetDuringIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	sc := ident.Schema(s)
	for _, tb := range []string{"rm_a", "rm_b"} {
		_, err := pool.Exec(ctx, `CREATE TABLE `+sc+`.`+tb+` (position bigint NOT NULL, type text NOT NULL)`)
		require.NoError(t, err)
	}
	appendN(t, s, "P", 20, 10)
	newRunner := func(name string) *projection.Runner {
		r, err := projection.New(s, name, query.Tagged([]string{"P"}), insertRowsInto(sc, "rm_"+name), withTables([]string{"rm_" + name}, []string{"rm_v"}))
		require.NoError(t, err)
		return r
	}
	a := newRunner("a")
	start(t, a)
	caughtUpTo(t, s, a)
	b := newRunner("b")
	stopB := start(t, b)
	await.True(t, time.Minute, "b holds the log", func() bool {
		st, err := projection.GetStatus(ctx, s, b.Name())
		return err == nil && st.State == projection.Active && count(t, pool, sc+".rm_b") == 20
	})
	stopB() // the new version's runner is between runs (a deploy)
	require.Equal(t, 20, count(t, pool, sc+".rm_v"))

	// A reader holds the view (as any SELECT in a transaction does).
	rtx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = rtx.Rollback(ctx) }()
	var n int
	require.NoError(t, rtx.QueryRow(ctx, `SELECT count(*) FROM `+sc+`.rm_v`).Scan(&n))
	viewLocks := func(granted bool) int {
		var w int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE granted = $2 AND relation = to_regclass($1)`, sc+".rm_v", granted).Scan(&w))
		return w
	}

	done := make(chan error, 1)
	go func() { done <- projection.Switch(ctx, s, b.Name()) }()
	await.True(t, time.Minute, "Switch waits for the view's lock, past its catch-up check", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Switch returned first: %v", err)
		default:
		}
		return viewLocks(false) > 0
	})
	// Meanwhile any tool resets the new version.
	require.NoError(t, projection.Reset(ctx, s, b.Name(), nil))
	require.NoError(t, rtx.Commit(ctx))
	// Switch's transaction ends (it holds the view's lock until then).
	await.True(t, time.Minute, "Switch's transaction ended", func() bool { return viewLocks(true) == 0 })
	var serving string
	require.NoError(t, pool.QueryRow(ctx, `SELECT projection FROM `+sc+`.read_model_views`).Scan(&serving))
	require.Equal(t, "a", serving, "the reset version does not serve the view")
	require.Equal(t, 20, count(t, pool, sc+".rm_v"), "readers of the view see the whole model")
	st, err := projection.GetStatus(ctx, s, a.Name())
	require.NoError(t, err)
	require.Equal(t, projection.Active, st.State)
	select {
	case err := <-done:
		t.Fatalf("Switch returned before the new version rebuilt: %v", err)
	default:
	}

	// The new version runs again and rebuilds: Switch completes.
	start(t, newRunner("b"))
	require.NoError(t, <-done)
	require.Equal(t, 20, count(t, pool, sc+".rm_v"))
	st, err = projection.GetStatus(ctx, s, a.Name())
	require.NoError(t, err)
	require.Equal(t, projection.Paused, st.State)
}
