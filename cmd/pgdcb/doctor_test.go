package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// holdXID opens a transaction on a connection of its own that takes a
// transaction id and keeps it until the test ends; it returns the backend's
// pid and the id.
func holdXID(t *testing.T, dsn string) (pid int, xid uint64) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	var x string
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid(), pg_current_xact_id()::text`).Scan(&pid, &x))
	_, err = fmt.Sscan(x, &xid)
	require.NoError(t, err)
	return pid, xid
}

// On a fresh schema, doctor says what is pending and exits 3; -json is one
// object.
func TestDoctorPendingMigrations(t *testing.T) {
	t.Parallel()
	sh, schema := db(t)
	r := sh("", "doctor", "-json")
	require.Equal(t, exitSchema, r.code, r.stderr)
	d := decode(t, r.stdout)
	s := d["schema"].(map[string]any)
	require.Equal(t, schema, s["name"])
	require.EqualValues(t, 0, s["version"])
	require.Len(t, s["pending"], len(pgdcbsql.Migrations()))
	require.Equal(t, false, s["current"])
	require.Contains(t, d["problems"].([]any)[0], "pending")
	require.Contains(t, d, "horizon", "the horizon is read whatever the schema")

	require.Equal(t, 0, sh("", "migrate").code)
	r = sh("", "doctor")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, fmt.Sprintf(`SCHEMA\s+%s: version %d of %d, current`, schema, pgdcbsql.LatestVersion(), pgdcbsql.LatestVersion()), r.stdout)

	// runstore's section only where its own migration line is applied.
	r = sh("", "doctor", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, decode(t, r.stdout), "runstore")
	require.Equal(t, 0, sh("", "migrate", "-runstore").code)
	r = sh("", "doctor", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, decode(t, r.stdout), "runstore")
}

// Readers are listed with their lag; a transaction holding an id is listed
// with its pid, whatever else the shared server runs.
func TestDoctorReadersAndTransactions(t *testing.T) {
	t.Parallel()
	sh, schema := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	ctx := t.Context()
	store, err := eventstore.New(pgtest.Pool(t), &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, projection.Pause(ctx, store, "balances")) // creates the checkpoint
	_, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("A", nil), pgdcb.MustEvent("A", nil)})
	require.NoError(t, err)

	pid, xid := holdXID(t, pgtest.DSN(t))
	r := sh("", "doctor", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	d := decode(t, r.stdout)
	readers := d["readers"].([]any)
	require.Len(t, readers, 1)
	rd := readers[0].(map[string]any)
	require.Equal(t, "balances", rd["name"])
	require.Equal(t, "projection", rd["kind"])
	require.Equal(t, "PAUSED", rd["state"])
	require.EqualValues(t, 2, rd["lag_events"])
	require.Greater(t, rd["lag_seconds"], 0.0)

	found := false
	for _, x := range d["horizon"].(map[string]any)["transactions"].([]any) {
		x := x.(map[string]any)
		if int(x["pid"].(float64)) == pid {
			found = true
			require.EqualValues(t, xid, x["xid"])
			require.Equal(t, "idle in transaction", x["state"])
			require.Contains(t, x["query"], "pg_current_xact_id")
		}
	}
	require.True(t, found, "pid %d holding xid %d not among the transactions: %s", pid, xid, r.stdout)

	r = sh("", "doctor")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `balances\s+projection\s+PAUSED\s+2\s`, r.stdout)
}

// On a cluster of its own, doctor names the transaction holding the horizon:
// its pid, database, state and age, and says that readers wait for it.
func TestDoctorNamesTheHorizonHolder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	srv, err := pgserver.StartThrowaway(ctx, pgserver.Options{})
	cancel()
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip("needs local PostgreSQL binaries for a cluster of its own:", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	sh := func(args ...string) result {
		return cli(t, "", append([]string{"-dsn", srv.DSN(), "-schema", "app"}, args...)...)
	}
	require.Equal(t, 0, sh("migrate").code)
	require.Equal(t, 0, sh("append", "-type", "A").code)

	r := sh("doctor", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	h := decode(t, r.stdout)["horizon"].(map[string]any)
	require.Nil(t, h["holder"], "nothing holds the horizon yet: %s", r.stdout)
	require.Equal(t, false, h["delaying"])

	// A projection whose handler fails at once becomes FAILED (MaxAttempts
	// 1); nothing else runs on this cluster to delay its first batch.
	pool, err := pgtest.NewPool(t.Context(), srv.DSN())
	require.NoError(t, err)
	defer pool.Close()
	store, err := eventstore.New(pool, &eventstore.Config{Schema: "app"})
	require.NoError(t, err)
	p, err := projection.New(store, "balances", query.All(),
		func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error {
			return errors.New("read model unreachable")
		},
		&projection.Config{ReaderConfig: projection.ReaderConfig{MaxAttempts: 1, PollInterval: 20 * time.Millisecond}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	await.Until(t, time.Minute, func() (bool, string) {
		st, err := projection.GetStatus(t.Context(), store, "balances")
		return err == nil && st.State == projection.Failed, fmt.Sprintf("projection not FAILED: %+v %v", st, err)
	})
	stop()
	<-done

	pid, xid := holdXID(t, srv.DSN())
	require.Equal(t, 0, sh("append", "-type", "A").code) // commits behind the held id

	r = sh("doctor", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	d := decode(t, r.stdout)
	h = d["horizon"].(map[string]any)
	require.EqualValues(t, xid, h["xmin"])
	require.Equal(t, true, h["delaying"])
	holder := h["holder"].(map[string]any)
	require.EqualValues(t, pid, holder["pid"])
	require.EqualValues(t, xid, holder["xid"])
	require.Equal(t, "postgres", holder["database"])
	require.Equal(t, "idle in transaction", holder["state"])
	require.NotEmpty(t, holder["xact_start"])
	require.NotEmpty(t, holder["query_start"])
	require.Contains(t, fmt.Sprint(d["problems"]), fmt.Sprintf("pid %d", pid))
	rd := d["readers"].([]any)[0].(map[string]any)
	require.Equal(t, "FAILED", rd["state"])
	require.EqualValues(t, 2, rd["lag_events"], "a FAILED projection is still at the start of the log")
	require.Contains(t, rd["last_error"], "read model unreachable")
	require.Contains(t, fmt.Sprint(d["problems"]), "projection balances is FAILED")

	r = sh("doctor")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("xmin %d held by pid %d (database postgres", xid, pid))
	require.Contains(t, r.stdout, "readers wait for it")
	require.Regexp(t, `balances\s+projection\s+FAILED\s`, r.stdout)
}

func TestWidenXID(t *testing.T) {
	t.Parallel()
	require.Equal(t, uint64(5<<32|10), widenXID(10, 5<<32|10))
	require.Equal(t, uint64(5<<32|20), widenXID(20, 5<<32|10))
	require.Equal(t, uint64(6<<32|3), widenXID(3, 5<<32|0xFFFFFFF0), "an id past the wrap-around is of the next epoch")
}
