package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/syncbuf"
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
	appendA := func(tag string) pgdcb.AppendResult {
		r, err := store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("A", map[string]int{}, "k="+tag)})
		require.NoError(t, err)
		return r
	}
	r0 := appendA("0")
	appendA("1")
	after := cursor.Cursor{TransactionID: r0.TransactionID, Position: r0.Positions[0]}

	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
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
	_, err = store.AppendTx(ctx, early, []pgdcb.Event{pgdcb.MustEvent("A", map[string]int{}, "k=early")})
	require.NoError(t, err)
	appendA("2")
	require.NoError(t, early.Commit(ctx))
	_, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("B", map[string]int{}, "k=b")})
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

// replicaDSN returns a server with wal_level=replica: the shared test
// server when it has it, else a throwaway cluster started for the test.
func replicaDSN(t *testing.T) string {
	t.Helper()
	var level string
	require.NoError(t, pgtest.Pool(t).QueryRow(t.Context(), `SHOW wal_level`).Scan(&level))
	if level == "replica" {
		return pgtest.DSN(t)
	}
	srv, err := pgserver.StartThrowaway(t.Context(), pgserver.Options{Settings: map[string]string{"wal_level": "replica"}})
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv.DSN()
}

// TestTailLogicalNeedsWALLevelLogical: on a server with wal_level=replica,
// tail -logical fails at once (exit 6) saying why and what to change; it
// printed nothing, for as long as it ran.
func TestTailLogicalNeedsWALLevelLogical(t *testing.T) {
	t.Parallel()
	dsn := replicaDSN(t)
	schema := schemaOnDSN(t, dsn)
	sh := func(ctx context.Context, args ...string) result {
		var out, errOut syncbuf.Buffer
		code := run(ctx, append([]string{"-dsn", dsn, "-schema", schema}, args...), strings.NewReader(""), &out, &errOut)
		return result{code, out.String(), errOut.String()}
	}
	require.Equal(t, 0, sh(t.Context(), "migrate").code)
	require.Equal(t, 0, sh(t.Context(), "append", "-type", "A").code)
	// The deadline only bounds how long a failure takes to show.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r := sh(ctx, "tail", "-logical")
	require.NoError(t, ctx.Err(), "tail -logical did not fail by itself: %s", r.stderr)
	require.Equal(t, 6, r.code, r.stderr)
	require.Contains(t, r.stderr, "pgdcb: tail: refused: wal_level is replica; -logical needs wal_level=logical: run ALTER SYSTEM SET wal_level = logical and restart the server")
	require.Empty(t, r.stdout)
}

// schemaOnDSN is a fresh schema name on the server at dsn, dropped when
// the test ends.
func schemaOnDSN(t *testing.T, dsn string) string {
	t.Helper()
	if dsn == pgtest.DSN(t) {
		return pgtest.Schema(t)
	}
	return "pgdcb_tail_replica" // a throwaway cluster of this test alone
}

// TestTailWarnsOnRetry: the tail's reader logs its retries on stderr (the
// events table renamed away under it: each read fails and is retried), and
// follows on once the table is back.
func TestTailWarnsOnRetry(t *testing.T) {
	t.Parallel()
	sh, schema := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	require.Equal(t, 0, sh("", "append", "-type", "A").code)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-dsn", pgtest.DSN(t), "-schema", schema, "tail", "-poll", "50ms"}, strings.NewReader(""), &out, &errOut)
	}()
	require.Eventually(t, func() bool { return len(lines(out.String())) == 1 }, time.Minute, 20*time.Millisecond, errOut.String())
	pool := pgtest.Pool(t)
	events := pgx.Identifier{schema, "events"}.Sanitize()
	_, err := pool.Exec(t.Context(), `ALTER TABLE `+events+` RENAME TO events_away`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(errOut.String(), "level=WARN") }, time.Minute, 20*time.Millisecond, errOut.String())
	require.Contains(t, errOut.String(), "events")
	_, err = pool.Exec(t.Context(), `ALTER TABLE `+pgx.Identifier{schema, "events_away"}.Sanitize()+` RENAME TO events`)
	require.NoError(t, err)
	require.Equal(t, 0, sh("", "append", "-type", "A").code)
	require.Eventually(t, func() bool { return len(lines(out.String())) == 2 }, time.Minute, 20*time.Millisecond, errOut.String())
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, errOut.String())
	case <-time.After(time.Minute):
		t.Fatal("tail did not stop on cancel")
	}
}
