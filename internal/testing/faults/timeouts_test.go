package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

// requireSQLState requires err to carry a server error with the given code,
// and not to claim an unknown outcome: the server reported that the
// statement failed, so nothing was written.
func requireSQLState(t *testing.T, err error, code, what string) {
	t.Helper()
	require.Error(t, err, what)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "%s: want SQLSTATE %s, got %v", what, code, err)
	require.Equal(t, code, pgErr.Code, "%s: %v", what, err)
	require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown, "%s: the server reported the failure; the outcome is known", what)
}

// hotWrites are the appends scenario 6 makes on the boundary acct=hot: one
// event, a batch of 100, and a conditional append.
func hotWrites(store *eventstore.Store, prefix string) map[string]func(context.Context) (attempt, error) {
	return map[string]func(context.Context) (attempt, error){
		"append-1": func(ctx context.Context) (attempt, error) {
			id := prefix + "-1"
			_, err := store.Append(ctx, batch("Hot", id, 1, "acct=hot"))
			return attempt{id: id, kind: "append-1", n: 1, err: err}, err
		},
		"append-100": func(ctx context.Context) (attempt, error) {
			id := prefix + "-100"
			_, err := store.Append(ctx, batch("Hot", id, 100, "acct=hot"))
			return attempt{id: id, kind: "append-100", n: 100, err: err}, err
		},
		"appendif": func(ctx context.Context) (attempt, error) {
			id := prefix + "-if"
			_, err := store.AppendIf(ctx, batch("Hot", id, 1, "acct=hot"),
				appendif.FailIf(query.Tagged([]string{"Nothing"}, "acct=hot"), nil))
			return attempt{id: id, kind: "appendif", n: 1, err: err}, err
		},
	}
}

// holdHotKey opens a transaction that holds the exclusive key of acct=hot
// (a conditional append on it, not committed yet), until the returned
// function commits it.
func holdHotKey(t *testing.T, e *env, store *eventstore.Store, led *ledger, id string) (commit func()) {
	t.Helper()
	tx, err := e.admin.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = store.AppendIfTx(t.Context(), tx, batch("Holder", id, 1, "acct=hot"),
		appendif.FailIf(query.Tagged([]string{"Holder-" + id}, "acct=hot"), nil))
	require.NoError(t, err)
	return func() {
		err := tx.Commit(t.Context())
		led.add(attempt{id: id, kind: "holder", n: 1, err: err})
		require.NoError(t, err)
	}
}

// Scenario 6, timeouts. Writers whose sessions set lock_timeout or
// statement_timeout (100 ms) append on a boundary whose key another
// transaction holds: each append fails with the server's error (55P03,
// 57014), not an unknown outcome, and writes nothing; once the key is free
// the same appends succeed.
func TestLockAndStatementTimeouts(t *testing.T) {
	cluster(t)
	began := time.Now()
	e := newEnv(t)
	led := &ledger{}
	for _, c := range []struct {
		name, param, code string
	}{
		{"lock_timeout", "lock_timeout", pgcode.LockNotAvailable},
		{"statement_timeout", "statement_timeout", pgcode.QueryCanceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := newPool(t, "faults_"+c.name, 4, map[string]string{c.param: "100ms"})
			store := e.store(t, pool, nil)
			commit := holdHotKey(t, e, e.store(t, e.admin, nil), led, c.name+"-holder")
			for name, write := range hotWrites(store, c.name+"-held") {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				start := time.Now()
				a, err := write(ctx)
				cancel()
				led.add(a)
				requireSQLState(t, err, c.code, name)
				require.Less(t, time.Since(start), 5*time.Second, "%s: the timeout ended the wait", name)
			}
			commit()
			for name, write := range hotWrites(store, c.name+"-free") {
				a, err := write(t.Context())
				led.add(a)
				require.NoError(t, err, "%s once the key is free", name)
			}
		})
	}
	v := verify(t, e, led)
	v.f.Scenario = "6 lock/statement timeout"
	v.f.Elapsed = time.Since(began)
	v.f.Note = "errors: " + kinds(errorsOf(led.all()))
	record(t, v.f)
	requireClean(t, v)
}

// Scenario 6, full disk. The events table (and its indexes) of a schema
// made for the case live in a tablespace on an 8 MB tmpfs, which a filler
// table fills up. Appends then fail with the server's disk-full error
// (53100), not an unknown outcome, and write nothing, not even part of a
// batch; once the filler is dropped they work again.
func TestDiskFull(t *testing.T) {
	s := cluster(t)
	began := time.Now()
	if os.Geteuid() != 0 {
		t.Skip("the disk-full case mounts a tmpfs, which needs root; running as uid ", os.Geteuid())
	}
	dir, err := os.MkdirTemp("", "pgdcb-faults-tblspc-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.Remove(dir) })
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("the disk-full case needs a small tmpfs, and mounting one is not permitted here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		// After DROP TABLESPACE a server process may still hold one of its
		// files open for a moment (each closes them as it absorbs the drop's
		// barrier; on a busy machine that can take a while): umount says
		// "target is busy" then. Retried until a deadline, then detached
		// lazily (the kernel unmounts once the last file is closed).
		var out []byte
		var err error
		await.Within(15*time.Second, func() (bool, string) {
			out, err = exec.Command("umount", dir).CombinedOutput()
			return err == nil || !strings.Contains(string(out), "busy"), ""
		})
		if err == nil {
			return
		}
		if lazy, lerr := exec.Command("umount", "-l", dir).CombinedOutput(); lerr != nil {
			t.Errorf("umount %s: %v: %s; umount -l: %v: %s", dir, err, out, lerr, lazy)
		} else {
			t.Logf("umount %s: %s; detached with umount -l", dir, strings.TrimSpace(string(out)))
		}
	})
	uid, gid, err := s.Owner()
	require.NoError(t, err)
	require.NoError(t, os.Chown(dir, uid, gid))

	e := newEnv(t)
	ctx := t.Context()
	space := e.schema + "_small"
	_, err = e.admin.Exec(ctx, `CREATE TABLESPACE `+space+` LOCATION '`+dir+`'`)
	require.NoError(t, err)
	t.Cleanup(func() {
		// After the schema is dropped (cleanups run last-in first-out).
		if _, err := e.admin.Exec(context.Background(), `DROP TABLESPACE IF EXISTS `+space); err != nil {
			t.Errorf("dropping tablespace: %v", err)
		}
	})
	t.Cleanup(func() {
		_, _ = e.admin.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+e.quoted+` CASCADE`)
	})
	_, err = e.admin.Exec(ctx, `ALTER TABLE `+e.quoted+`.events SET TABLESPACE `+space)
	require.NoError(t, err)
	rows, err := e.admin.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'events'`, e.schema)
	require.NoError(t, err)
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, ix := range indexes {
		_, err = e.admin.Exec(ctx, `ALTER INDEX `+e.quoted+`.`+pgx.Identifier{ix}.Sanitize()+` SET TABLESPACE `+space)
		require.NoError(t, err)
	}

	store := e.store(t, newPool(t, "faults_disk", 4, nil), nil)
	led := &ledger{}
	write := func(kind string, n int) error {
		id := fmt.Sprintf("%s-%d", kind, len(led.all()))
		var err error
		if kind == "appendif" {
			acct := "acct=" + id
			_, err = store.AppendIf(ctx, batch("Disk", id, n, acct), appendif.FailIf(query.Tagged(nil, acct), nil))
		} else {
			_, err = store.Append(ctx, batch("Disk", id, n))
		}
		led.add(attempt{id: id, kind: kind, n: n, err: err})
		return err
	}
	for range 5 {
		require.NoError(t, write("append-100", 100), "before the disk is full")
	}

	// Fill the tmpfs.
	_, err = e.admin.Exec(ctx, `CREATE TABLE `+e.quoted+`.filler (b text) TABLESPACE `+space)
	require.NoError(t, err)
	var fillErr error
	for range 40 {
		_, fillErr = e.admin.Exec(ctx, `INSERT INTO `+e.quoted+`.filler SELECT repeat(md5(g::text), 30) FROM generate_series(1, 500) g`)
		if fillErr != nil {
			break
		}
	}
	requireSQLState(t, fillErr, pgcode.DiskFull, "filling the disk")

	// Appends now fail, whole batches first.
	var full error
	for range 20 {
		if full = write("append-100", 100); full != nil {
			break
		}
	}
	requireSQLState(t, full, pgcode.DiskFull, "a batch of 100 on a full disk")
	require.Contains(t, full.Error(), "No space left on device")
	t.Logf("disk full: %v", full)
	for range 5 {
		if err := write("append-1", 1); err != nil {
			requireSQLState(t, err, pgcode.DiskFull, "one event on a full disk")
		}
		if err := write("appendif", 1); err != nil && !errors.Is(err, pgdcb.ErrConditionFailed) {
			requireSQLState(t, err, pgcode.DiskFull, "a conditional append on a full disk")
		}
	}

	// Free the space: appends work again.
	_, err = e.admin.Exec(ctx, `DROP TABLE `+e.quoted+`.filler`)
	require.NoError(t, err)
	freed := time.Now()
	require.NoError(t, write("append-100", 100), "after space was freed")
	recovery := time.Since(freed)
	for range 3 {
		require.NoError(t, write("append-100", 100), "after space was freed")
		require.NoError(t, write("appendif", 1), "after space was freed")
	}

	v := verify(t, e, led)
	v.f.Scenario = "6 disk full (tmpfs)"
	v.f.Recovery = recovery
	v.f.Elapsed = time.Since(began)
	v.f.Note = "errors: " + kinds(errorsOf(led.all()))
	record(t, v.f)
	requireClean(t, v)
}
