package sql_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// pgTool is the path of a PostgreSQL client program (pg_dump, pg_restore)
// of the newest version under /usr/lib/postgresql/*/bin, else on PATH; the
// test is skipped without it.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestV := "", -1
	for _, d := range dirs {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if p := filepath.Join(d, name); v > bestV && fileExists(p) {
			best, bestV = p, v
		}
	}
	if best != "" {
		return best
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	t.Skipf("needs %s (PostgreSQL's client programs, under /usr/lib/postgresql/*/bin or on PATH) to dump and restore a schema", name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// connString is cfg as a libpq connection string for database db, and the
// password to pass in the environment.
func connString(cfg *pgx.ConnConfig, db string) (string, string) {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, db), cfg.Password
}

func runTool(t *testing.T, password, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v: %s", filepath.Base(path), args, out)
}

// restoredLog is what the source store held when it was dumped.
type restoredLog struct {
	schema     string
	events     []pgdcb.StoredEvent
	checkpoint cursor.Cursor // the checkpoint row "proj": after the second event
}

// dumpedStore writes a store (five transactions, one of two events, ids,
// metadata, a checkpoint row) in a fresh schema and dumps the schema with
// pg_dump's custom format.
func dumpedStore(t *testing.T) (restoredLog, string) {
	t.Helper()
	ctx := context.Background()
	pgDump := pgTool(t, "pg_dump")
	s, pool, schema := migratedStore(t)
	for i, evs := range [][]pgdcb.Event{
		{pgdcb.MustEvent("CourseDefined", map[string]int{"capacity": 10}, "course=c1")},
		{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=a"), pgdcb.MustEvent("Paid", 10, "student=a")},
		{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=b")},
		{pgdcb.MustEvent("Other", nil, "course=c2")},
	} {
		evs[0].ID = uuid.New()
		evs[0].Metadata = []byte(fmt.Sprintf(`{"n": %d}`, i))
		_, err := s.Append(ctx, evs)
		require.NoError(t, err)
	}
	events, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Len(t, events, 5)
	q := ident.Schema(s)
	_, err = pool.Exec(ctx, `INSERT INTO `+q+`.checkpoints (name, transaction_id, position) VALUES ('proj', $1::text::xid8, $2)`,
		fmt.Sprint(events[1].TransactionID), events[1].Position)
	require.NoError(t, err)

	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	conn, pw := connString(cfg, cfg.Database)
	file := filepath.Join(t.TempDir(), "store.dump")
	runTool(t, pw, pgDump, "-d", conn, "-n", schema, "-Fc", "-f", file)
	return restoredLog{schema, events, cursor.Cursor{TransactionID: events[1].TransactionID, Position: events[1].Position}}, file
}

// restoreInto restores the dump into a new database of the server at dsn
// and returns a pool on it.
func restoreInto(t *testing.T, dsn, file string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pgRestore := pgTool(t, "pg_restore")
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	admin, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer admin.Close(ctx)
	db := fmt.Sprintf("pgdcb_restore_%d", time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+db)
	require.NoError(t, err)
	conn, pw := connString(cfg, db)
	runTool(t, pw, pgRestore, "-d", conn, "--no-owner", "--no-privileges", "--exit-on-error", file)
	pcfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	pcfg.ConnConfig.Database = db
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		pool.Close()
		c, err := pgx.ConnectConfig(context.Background(), cfg)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	})
	return pool
}

// checkRestored runs a restored store: it refuses appends until the rebase
// when the server's counter is below the stored ids (rebase), then reads the
// log as it was, appends after it, decides (a conflict is detected, an
// event id and an idempotency query already stored are recognised) and
// tails from the restored checkpoint through the new events.
func checkRestored(t *testing.T, pool *pgxpool.Pool, src restoredLog, rebase bool) {
	t.Helper()
	ctx := context.Background()
	s, err := eventstore.New(pool, &eventstore.Config{Schema: src.schema, NotifyDisabled: true})
	require.NoError(t, err)
	err = s.CheckSchema(ctx)
	if rebase {
		require.ErrorIs(t, err, pgdcb.ErrTransactionIDsAhead, "the new cluster's counter is below the stored ids")
		mapped, _, err := pgdcbsql.RebaseTransactionIDs(ctx, pool, src.schema)
		require.NoError(t, err)
		require.EqualValues(t, 4, mapped, "four transactions (the checkpoint's is one of them)")
	}
	require.NoError(t, s.CheckSchema(ctx))

	got, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Len(t, got, len(src.events))
	for i, e := range got {
		w := src.events[i]
		require.Equal(t, w.Position, e.Position, "positions are the dump's")
		require.Equal(t, w.Type, e.Type)
		require.Equal(t, w.ID, e.ID)
		require.JSONEq(t, string(w.Data), string(e.Data))
		require.True(t, w.OccurredAt.Equal(e.OccurredAt))
		if !rebase {
			require.Equal(t, w.TransactionID, e.TransactionID)
		}
	}
	var cp cursor.Cursor
	require.NoError(t, pool.QueryRow(ctx, `SELECT transaction_id::text::bigint, position FROM `+ident.Schema(s)+`.checkpoints WHERE name = 'proj'`).
		Scan(&cp.TransactionID, &cp.Position))
	require.Equal(t, got[1].TransactionID, cp.TransactionID, "the checkpoint stays on its event")
	require.Equal(t, got[1].Position, cp.Position)

	// Decide: a decision's conflict is detected across the restore.
	seats := func() (int, appendif.Condition) {
		m := pgdcb.NewModel(query.Tagged([]string{"Subscribed"}, "course=c1"), 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
		cond, err := s.Project(ctx, m)
		require.NoError(t, err)
		return m.State, cond
	}
	n, cond := seats()
	require.Equal(t, 2, n, "the restored subscriptions are seen")
	res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=c")})
	require.NoError(t, err)
	require.Greater(t, res.Positions[0], got[len(got)-1].Position, "the position sequence was restored")
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=d")}, cond)
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "the event appended after the decision is a conflict")
	n, cond = seats()
	require.Equal(t, 3, n)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=d")}, cond)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Paid", 10, "student=a")}, appendif.Condition{}.WithIdempotency(query.Tagged([]string{"Paid"}, "student=a")))
	require.ErrorIs(t, err, pgdcb.ErrIdempotent, "a restored event matches an idempotency query")
	dup := pgdcb.MustEvent("Again", nil)
	dup.ID = got[0].ID
	_, err = s.Append(ctx, []pgdcb.Event{dup})
	require.ErrorIs(t, err, pgdcb.ErrIdempotent, "a restored event id is still unique")

	// Tail from the restored checkpoint: the rest of the old log, then the
	// new events, in that order.
	want := []string{"Paid/a", "Subscribed/b", "Other/", "Subscribed/c", "Subscribed/d"}
	await.Until(t, 30*time.Second, func() (bool, string) {
		b, err := s.ReadTail(ctx, query.All(), cp, 100)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range b.Events {
			st := ""
			for _, tg := range e.Tags.Tags() {
				if tg.Key() == "student" {
					st = tg.Value()
				}
			}
			seen = append(seen, e.Type+"/"+st)
		}
		return slices.Equal(seen, want), fmt.Sprint(seen)
	})
}

// A pg_dump of a store's schema restored into a new database of the same
// cluster works as it was: same positions and transaction ids, appends after
// it, decisions and tails across it.
func TestPgDumpRestoreIntoNewDatabase(t *testing.T) {
	t.Parallel()
	src, file := dumpedStore(t)
	checkRestored(t, restoreInto(t, pgtest.DSN(t), file), src, false)
}

// Restored into a new cluster, whose transaction counter is below the
// stored ids, the store refuses to append (ErrTransactionIDsAhead) until
// RebaseTransactionIDs, and then works as it was.
func TestPgDumpRestoreIntoNewCluster(t *testing.T) {
	t.Parallel()
	src, file := dumpedStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	srv, err := pgserver.StartThrowaway(ctx, pgserver.Options{})
	cancel()
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip("needs local PostgreSQL binaries for a cluster of its own:", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	checkRestored(t, restoreInto(t, srv.DSN(), file), src, true)
}
