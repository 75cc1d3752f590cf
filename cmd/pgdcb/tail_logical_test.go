package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgtest"
	"github.com/pgdcb/pgdcb/logical"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestTailLogical: tail -logical -after CURSOR prints the events after the
// cursor, then those committed later, in COMMIT order (an event whose
// transaction began first and committed last comes last), exactly once,
// while a transaction of the same database holds an xid for the whole test
// (which holds the default tail's horizon). It drops its
// slot on exit.
func TestTailLogical(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.LogicalCluster(t).DSN(), pgtest.LogicalSchema(t)
	sh := func(args ...string) result {
		return cli(t, "", append([]string{"-dsn", dsn, "-schema", schema}, args...)...)
	}
	require.Equal(t, 0, sh("migrate").code)
	pool := pgtest.LogicalPool(t)
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	ctx := t.Context()
	appendA := func(tag string) eventstore.AppendResult {
		r, err := store.Append(ctx, []eventstore.Event{eventstore.MustEvent("A", map[string]int{}, "k="+tag)})
		require.NoError(t, err)
		return r
	}
	r0 := appendA("0")
	appendA("1")
	after := cursor.Cursor{TransactionID: r0.TransactionID, Position: r0.Positions[0]}

	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(tctx, []string{"-dsn", dsn, "-schema", schema, "tail", "-logical", "-query", "A", "-after", after.String(), "-poll", "50ms"},
			strings.NewReader(""), &out, &errOut)
	}()
	// The initial read, after the cursor: the slot exists (creating it
	// waits for running transactions, so the holder comes after).
	require.Eventually(t, func() bool { return len(lines(out.String())) == 1 }, time.Minute, 20*time.Millisecond, errOut.String())

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(context.Background())
	var xid uint64
	require.NoError(t, holder.QueryRow(ctx, `SELECT pg_current_xact_id()`).Scan(&xid))
	early, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer early.Rollback(context.Background())
	_, err = store.AppendTx(ctx, early, []eventstore.Event{eventstore.MustEvent("A", map[string]int{}, "k=early")})
	require.NoError(t, err)
	appendA("2")
	require.NoError(t, early.Commit(ctx))
	_, err = store.Append(ctx, []eventstore.Event{eventstore.MustEvent("B", map[string]int{}, "k=b")})
	require.NoError(t, err)
	appendA("3")

	require.Eventually(t, func() bool { return len(lines(out.String())) >= 4 }, time.Minute, 20*time.Millisecond, errOut.String())
	var still *uint64
	require.NoError(t, holder.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()`).Scan(&still))
	require.Equal(t, &xid, still, "the holder ended before the delivery")
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, errOut.String())
	case <-time.After(time.Minute):
		t.Fatal("tail -logical did not stop on cancel")
	}
	var tagsSeen []any
	for _, l := range lines(out.String()) {
		tagsSeen = append(tagsSeen, decode(t, l)["tags"].([]any)[0])
	}
	require.Equal(t, []any{"k=1", "k=2", "k=early", "k=3"}, tagsSeen, "exactly once, in commit order")
	require.True(t, strings.HasPrefix(errOut.String(), "cursor "), errOut.String())
	st, err := logical.GetSlotStatus(ctx, pool, logical.SlotName(schema, tailReader))
	require.NoError(t, err)
	require.False(t, st.Exists, "tail -logical dropped its slot")
}
