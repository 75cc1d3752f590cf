package sql_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// newRole creates a role with a unique name and the given attributes (for
// example "LOGIN"), dropped when the test ends together with whatever it owns
// or was granted in this database.
func newRole(t *testing.T, admin *pgxpool.Pool, attrs string) string {
	t.Helper()
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	name := "pgdcb_test_role_" + hex.EncodeToString(b[:])
	r := pgx.Identifier{name}.Sanitize()
	_, err = admin.Exec(context.Background(), "CREATE ROLE "+r+" "+attrs)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Its sessions first: a pool of the role may still be closing.
		_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		_, err := admin.Exec(ctx, "DROP OWNED BY "+r+" CASCADE")
		require.NoError(t, err)
		_, err = admin.Exec(ctx, "DROP ROLE "+r)
		require.NoError(t, err)
	})
	return name
}

// rolePool connects to the test server as role (trust authentication).
func rolePool(t *testing.T, role string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.ConnConfig.User = role
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pool.Ping(context.Background()))
	return pool
}

// ownerRole creates a LOGIN role that is not a superuser and may create
// schemas in the test database: the migration role of the two-role set-up.
func ownerRole(t *testing.T, admin *pgxpool.Pool) (string, *pgxpool.Pool) {
	t.Helper()
	owner := newRole(t, admin, "LOGIN")
	var db string
	require.NoError(t, admin.QueryRow(context.Background(), "SELECT current_database()").Scan(&db))
	_, err := admin.Exec(context.Background(), "GRANT CREATE ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO "+pgx.Identifier{owner}.Sanitize())
	require.NoError(t, err)
	return owner, rolePool(t, owner)
}

// requireCode fails unless err is a PostgreSQL error with the SQLSTATE.
func requireCode(t *testing.T, err error, code string, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "not a server error: %v", err)
	require.Equal(t, code, pgErr.Code, "%v %v", pgErr.Message, msgAndArgs)
}

// inTx runs stmts in one transaction on pool and returns the first error
// (the transaction is then rolled back).
func inTx(ctx context.Context, pool *pgxpool.Pool, stmts ...string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
}

func runEvent(runID, typ, key string) runstore.CanonicalEngineEvent {
	return runstore.CanonicalEngineEvent{
		RunID: runID, EventType: typ, EventData: json.RawMessage(`{"ok": true}`),
		IdempotencyKey: key, EmittedAt: time.Now().UTC().Format(time.RFC3339Nano),
	}
}

// TestTwoRoleSetUp: an owner role (not a superuser) migrates the schema and
// grants an application role, which can then do everything the library does
// for an application — and nothing that deletes, rewrites or truncates the
// log, bypasses the trigger, or removes part of a run. The owner's retention
// and rebase still work.
func TestTwoRoleSetUp(t *testing.T) {
	ctx := context.Background()
	admin := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	_, ownerPool := ownerRole(t, admin)
	_, err := pgdcbsql.Migrate(ctx, ownerPool, schema)
	require.NoError(t, err)
	_, err = runstore.Migrate(ctx, ownerPool, schema)
	require.NoError(t, err)
	app := newRole(t, admin, "LOGIN")
	require.NoError(t, pgdcbsql.Grant(ctx, ownerPool, schema, app))
	require.NoError(t, pgdcbsql.Grant(ctx, ownerPool, schema, app), "idempotent")
	appPool := rolePool(t, app)
	q := pgx.Identifier{schema}.Sanitize()
	var ia *pgdcb.InvalidArgumentError
	require.ErrorAs(t, pgdcbsql.Grant(ctx, appPool, schema, app), &ia, "only the owner grants")
	require.Equal(t, "pool", ia.Name)

	s, err := eventstore.New(appPool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, s.CheckSchema(ctx))

	// Append, AppendIf, Read, ReadTail.
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "account=a1")})
	require.NoError(t, err)
	acct := query.Tagged(nil, "account=a1")
	cond, err := s.Project(ctx, pgdcb.NewModel(acct, 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 }))
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 5}, "account=a1")}, cond)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 6}, "account=a1")}, cond)
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	evs, _, err := s.ReadAll(ctx, acct, nil)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	// A tail stops at the oldest transaction running anywhere in the
	// cluster (other tests' included): wait for the horizon to pass.
	require.Eventually(t, func() bool {
		tail, err := s.ReadTail(ctx, acct, cursor.Start, 10)
		require.NoError(t, err)
		return len(tail.Events) == 2
	}, 30*time.Second, 20*time.Millisecond)

	// A command through the executor (its commands row included).
	exec, err := commands.New(s, nil)
	require.NoError(t, err)
	out, err := exec.Execute(ctx, commands.Command{Type: "Deposit", Handler: commands.HandlerFunc(
		func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
			_, c, err := dc.ReadAll(ctx, acct, nil)
			return []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 7}, "account=a1")},
				appendif.FailIf(acct, &c), err
		})})
	require.NoError(t, err)
	rec, err := exec.Command(ctx, out.CommandID)
	require.NoError(t, err)
	require.Equal(t, "Deposit", rec.Type)

	// A projection batch (checkpoint rows: INSERT, UPDATE), and its controls.
	seen := make(chan int, 16)
	r, err := projection.New(s, "balances", acct, func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		seen <- len(evs)
		return nil
	}, &projection.Config{ReaderConfig: projection.ReaderConfig{PollInterval: 20 * time.Millisecond, ElectionInterval: 20 * time.Millisecond}})
	require.NoError(t, err)
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(pctx) }()
	total := 0
	for total < 3 {
		select {
		case n := <-seen:
			total += n
		case err := <-done:
			t.Fatalf("projection stopped: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("projection did not deliver")
		}
	}
	require.Eventually(t, func() bool {
		st, err := r.Status(ctx)
		return err == nil && st.Cursor.Position > 0
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, projection.Pause(ctx, s, "balances"))
	require.NoError(t, projection.Resume(ctx, s, "balances"))

	// The runstore: AppendEvent (a duplicate included) and its projector.
	rs, err := runstore.New(s, nil)
	require.NoError(t, err)
	for i, key := range []string{"k1", "k2", "k3", "k3"} {
		res, err := rs.AppendEvent(ctx, runEvent("run-1", "Step", key))
		require.NoError(t, err)
		require.EqualValues(t, min(i+1, 3), res.RunSeq)
	}
	require.NoError(t, rs.CatchUp(ctx))
	snap, err := rs.GetSnapshot(ctx, "run-1")
	require.NoError(t, err)
	require.EqualValues(t, 3, snap.LastEventSeq)

	// What the application role cannot do.
	var before int
	require.NoError(t, appPool.QueryRow(ctx, "SELECT count(*) FROM "+q+".events").Scan(&before))
	denied := map[string][]string{
		"DELETE":             {"DELETE FROM " + q + ".events"},
		"UPDATE":             {"UPDATE " + q + ".events SET data = '{}'"},
		"rebase UPDATE":      {"SET LOCAL pgdcb.allow_rebase = 'on'", "UPDATE " + q + ".events SET transaction_id = transaction_id"},
		"TRUNCATE":           {"TRUNCATE " + q + ".events"},
		"flag, then DELETE":  {"SET LOCAL pgdcb.allow_delete = 'on'", "DELETE FROM " + q + ".events WHERE tags @> ARRAY['idempotency_key=k3']"},
		"part of a run":      {"SELECT " + q + ".delete_events_tagged('idempotency_key=k3')"},
		"a whole run":        {"SELECT " + q + ".delete_events_tagged('run_id=run-1')"},
		"rebase":             {"SELECT " + q + ".rebase_transaction_ids()"},
		"INSERT":             {"INSERT INTO " + q + ".events (type, tags, data) VALUES ('Forged', '{}', '{}')"},
		"DELETE snapshots":   {"DELETE FROM " + q + ".run_snapshots"},
		"DELETE commands":    {"DELETE FROM " + q + ".commands"},
		"CREATE in schema":   {"CREATE TABLE " + q + ".mine (x int)"},
		"ALTER TABLE":        {"ALTER TABLE " + q + ".events DISABLE TRIGGER USER"},
		"replica role":       {"SET LOCAL session_replication_role = replica", "DELETE FROM " + q + ".events"},
		"DELETE checkpoints": {"DELETE FROM " + q + ".checkpoints"},
	}
	for name, stmts := range denied {
		t.Run(name, func(t *testing.T) {
			err := inTx(ctx, appPool, stmts...)
			require.Error(t, err, name)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "%s: %v", name, err)
			// insufficient_privilege (also "must be owner" and "permission
			// denied to set parameter").
			require.Equal(t, pgcode.InsufficientPrivilege, pgErr.Code, "%s: %s", name, pgErr.Message)
		})
	}
	_, err = rs.DeleteRun(ctx, "run-1")
	requireCode(t, err, pgcode.InsufficientPrivilege, "DeleteRun as the application")
	// Import chooses recorded times: the owner's only.
	backdated := []pgdcb.StoredEvent{{Event: pgdcb.MustEvent("Opened", nil, "account=old"), OccurredAt: time.Unix(0, 0)}}
	err = pgx.BeginFunc(ctx, appPool, func(tx pgx.Tx) error { _, err := s.ImportTx(ctx, tx, backdated); return err })
	requireCode(t, err, pgcode.InsufficientPrivilege, "ImportTx as the application")
	require.ErrorContains(t, err, "only the schema's owner may import")
	var after int
	require.NoError(t, appPool.QueryRow(ctx, "SELECT count(*) FROM "+q+".events").Scan(&after))
	require.Equal(t, before, after, "nothing deleted")

	// The owner's retention: one run, through runstore and through the
	// function; then the rebase.
	ownerStore, err := eventstore.New(ownerPool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, ownerPool, func(tx pgx.Tx) error { _, err := ownerStore.ImportTx(ctx, tx, backdated); return err }))
	ownerRS, err := runstore.New(ownerStore, nil)
	require.NoError(t, err)
	_, err = rs.AppendEvent(ctx, runEvent("run-2", "Step", "k1"))
	require.NoError(t, err)
	n, err := ownerRS.DeleteRun(ctx, "run-1")
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	gone, err := rs.GetSnapshot(ctx, "run-1")
	require.NoError(t, err)
	require.Nil(t, gone, "the snapshot went with the run")
	require.NoError(t, ownerPool.QueryRow(ctx, "SELECT "+q+".delete_events_tagged('run_id=run-2')").Scan(&n))
	require.EqualValues(t, 1, n)
	ids, _, err := pgdcbsql.RebaseTransactionIDs(ctx, ownerPool, schema)
	require.NoError(t, err)
	require.Positive(t, ids)
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Closed", nil, "account=a1")})
	require.NoError(t, err)
	evs, _, err = s.ReadAll(ctx, acct, nil)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	require.Equal(t, "Closed", evs[3].Type)
}

// TestTriggerTrustsNoSessionFlag: a role that was given every write on
// events (by hand, not by Grant) is still refused by the trigger when it sets
// the retention or rebase flag itself, and cannot call the retention or
// rebase functions to remove one event of a run.
func TestTriggerTrustsNoSessionFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, admin, schema := migratedStore(t)
	q := ident.Schema(s)
	_, err := runstore.Migrate(ctx, admin, schema)
	require.NoError(t, err)
	rs, err := runstore.New(s, nil)
	require.NoError(t, err)
	for _, key := range []string{"k1", "k2", "k3"} {
		_, err := rs.AppendEvent(ctx, runEvent("run-1", "Step", key))
		require.NoError(t, err)
	}
	w := newRole(t, admin, "LOGIN")
	wq := pgx.Identifier{w}.Sanitize()
	_, err = admin.Exec(ctx, "GRANT USAGE ON SCHEMA "+q+" TO "+wq+"; GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON "+q+".events TO "+wq)
	require.NoError(t, err)
	wPool := rolePool(t, w)

	err = inTx(ctx, wPool, "SET LOCAL pgdcb.allow_delete = 'on'", "DELETE FROM "+q+".events WHERE tags @> ARRAY['idempotency_key=k3']")
	requireCode(t, err, pgcode.AppendOnly, "DELETE with the session's flag")
	err = inTx(ctx, wPool, "SET pgdcb.allow_delete = 'on'", "DELETE FROM "+q+".events")
	requireCode(t, err, pgcode.AppendOnly, "DELETE with a session-level flag")
	err = inTx(ctx, wPool, "SET LOCAL pgdcb.allow_rebase = 'on'", "UPDATE "+q+".events SET transaction_id = transaction_id")
	requireCode(t, err, pgcode.AppendOnly, "UPDATE with the session's flag")
	err = inTx(ctx, wPool, "TRUNCATE "+q+".events")
	requireCode(t, err, pgcode.AppendOnly, "TRUNCATE")
	err = inTx(ctx, wPool, "SELECT "+q+".delete_events_tagged('idempotency_key=k3')")
	requireCode(t, err, pgcode.InsufficientPrivilege, "delete_events_tagged")
	err = inTx(ctx, wPool, "SELECT "+q+".rebase_transaction_ids()")
	requireCode(t, err, pgcode.InsufficientPrivilege, "rebase_transaction_ids")

	evs, err := rs.FetchEvents(ctx, "run-1", nil)
	require.NoError(t, err)
	require.Len(t, evs, 3, "the run is whole")

	// The owner (here a superuser) still can, through the function only.
	err = inTx(ctx, admin, "TRUNCATE "+q+".events")
	requireCode(t, err, pgcode.AppendOnly, "TRUNCATE as the owner")
	var n int64
	require.NoError(t, admin.QueryRow(ctx, "SELECT "+q+".delete_events_tagged('run_id=run-1')").Scan(&n))
	require.EqualValues(t, 3, n)
}

// TestGrantRefuses: roles that could bypass the trigger, and bad arguments.
func TestGrantRefuses(t *testing.T) {
	ctx := context.Background()
	admin := pgtest.Pool(t)
	schema := pgtest.Schema(t)

	err := pgdcbsql.Grant(ctx, admin, schema, "nobody")
	require.ErrorIs(t, err, pgdcb.ErrNotMigrated)
	err = pgdcbsql.Grant(ctx, admin, `Bad"Schema`, "nobody")
	require.ErrorIs(t, err, pgdcb.ErrInvalidSchema)

	owner, ownerPool := ownerRole(t, admin)
	_, err = pgdcbsql.Migrate(ctx, ownerPool, schema)
	require.NoError(t, err)

	refused := func(role, why string) {
		t.Helper()
		err := pgdcbsql.Grant(ctx, admin, schema, role)
		require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, why)
		var ia *pgdcb.InvalidArgumentError
		require.ErrorAs(t, err, &ia)
		require.Equal(t, "role", ia.Name)
		require.Contains(t, ia.Reason, why)
		if !utf8.ValidString(role) || strings.ContainsRune(role, 0) {
			return // not a name the server could hold
		}
		var granted bool
		require.NoError(t, admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace n, aclexplode(n.nspacl) a
			JOIN pg_roles r ON r.oid = a.grantee WHERE n.nspname = $2 AND r.rolname = $1)`, role, schema).Scan(&granted))
		if role != owner {
			require.False(t, granted, "%s: nothing granted", why)
		}
	}
	refused("", "must not be empty")
	refused(strings.Repeat("r", 64), "longer than 63 bytes")
	refused("a\x00b", "without NUL")
	refused("a\xffb", "not valid UTF-8")
	refused("pgdcb_test_no_such_role", "no such role")
	refused(owner, "owns the schema")
	refused(newRole(t, admin, "LOGIN SUPERUSER"), "superuser")
	refused(newRole(t, admin, "LOGIN IN ROLE "+pgx.Identifier{owner}.Sanitize()), "member of the owner")
	refused(newRole(t, admin, "LOGIN NOINHERIT IN ROLE "+pgx.Identifier{owner}.Sanitize()), "member of the owner")
	refused(newRole(t, admin, "LOGIN CREATEROLE"), "CREATEROLE")
	refused(newRole(t, admin, "LOGIN IN ROLE pg_write_all_data"), "INSERT on events")

	// Rights held through another role are not Grant's to take away.
	writer := newRole(t, admin, "NOLOGIN")
	_, err = ownerPool.Exec(ctx, "GRANT DELETE ON "+pgx.Identifier{schema, "events"}.Sanitize()+" TO "+pgx.Identifier{writer}.Sanitize())
	require.NoError(t, err)
	refused(newRole(t, admin, "LOGIN IN ROLE "+pgx.Identifier{writer}.Sanitize()), "DELETE on events")

	// A name that needs quoting is quoted, and granted.
	odd := newRole(t, admin, "LOGIN")
	quoted := odd + `"; DROP TABLE x; -- Odd`
	_, err = admin.Exec(ctx, "ALTER ROLE "+pgx.Identifier{odd}.Sanitize()+" RENAME TO "+pgx.Identifier{quoted}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		// newRole's cleanup drops the role by its first name.
		_, _ = admin.Exec(context.Background(), "ALTER ROLE "+pgx.Identifier{quoted}.Sanitize()+" RENAME TO "+pgx.Identifier{odd}.Sanitize())
	})
	require.NoError(t, pgdcbsql.Grant(ctx, ownerPool, schema, quoted))
	var can bool
	require.NoError(t, admin.QueryRow(ctx, "SELECT has_function_privilege($1, $2, 'EXECUTE')", quoted,
		pgx.Identifier{schema}.Sanitize()+".append_events(text[], integer[], text[], jsonb[], jsonb[], uuid[], bigint[], boolean[], boolean[], integer[], text[], integer[], text[], xid8, bigint, pg_snapshot, timestamptz)").Scan(&can))
	require.True(t, can)
}

// TestGrantTakesBackWhatItDoesNotGive: a role granted more by hand (writes on
// events, DELETE on the snapshots, retention) holds exactly Grant's set after
// Grant.
func TestGrantTakesBackWhatItDoesNotGive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, admin, schema := migratedStore(t)
	q := ident.Schema(s)
	app := newRole(t, admin, "LOGIN")
	aq := pgx.Identifier{app}.Sanitize()
	_, err := admin.Exec(ctx, "GRANT ALL ON SCHEMA "+q+" TO "+aq+"; GRANT ALL ON ALL TABLES IN SCHEMA "+q+" TO "+aq+
		"; GRANT EXECUTE ON FUNCTION "+q+".delete_events_tagged TO "+aq)
	require.NoError(t, err)
	require.NoError(t, pgdcbsql.Grant(ctx, admin, schema, app))
	core := []string{
		"checkpoints:INSERT", "checkpoints:SELECT", "checkpoints:UPDATE",
		"commands:INSERT", "commands:SELECT",
		"decision_snapshot_epoch:SELECT",
		"decision_snapshots:INSERT", "decision_snapshots:SELECT", "decision_snapshots:UPDATE",
		"events:SELECT",
		"projection_partitions:INSERT", "projection_partitions:SELECT", "projection_partitions:UPDATE",
		"projection_workers:DELETE", "projection_workers:INSERT", "projection_workers:SELECT", "projection_workers:UPDATE",
		"read_model_views:SELECT",
		"schema_functions:SELECT",
		"schema_migrations:SELECT",
		"subject_keys:INSERT", "subject_keys:SELECT",
	}
	require.Equal(t, core, tablePrivileges(t, admin, q, app), "without runstore's tables")

	// runstore's tables, once runstore.Migrate created them.
	_, err = runstore.Migrate(ctx, admin, schema)
	require.NoError(t, err)
	require.NoError(t, pgdcbsql.Grant(ctx, admin, schema, app))
	withRunstore := append(slices.Clone(core), "run_snapshots:INSERT", "run_snapshots:SELECT", "run_snapshots:UPDATE", "runstore_migrations:SELECT")
	slices.Sort(withRunstore)
	require.Equal(t, withRunstore, tablePrivileges(t, admin, q, app))
	var usage, create bool
	require.NoError(t, admin.QueryRow(ctx, "SELECT has_schema_privilege($1, $2, 'USAGE'), has_schema_privilege($1, $2, 'CREATE')", app, schema).Scan(&usage, &create))
	require.True(t, usage)
	require.False(t, create)
}

// tablePrivileges lists role's privileges on the schema's tables, as
// "table:PRIVILEGE", sorted.
func tablePrivileges(t *testing.T, admin *pgxpool.Pool, q, app string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := admin.Query(ctx, `SELECT c.relname, p.priv
		  FROM pg_class c, unnest(ARRAY['SELECT','INSERT','UPDATE','DELETE','TRUNCATE','REFERENCES','TRIGGER']) p(priv)
		 WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r' AND has_table_privilege($2, c.oid, p.priv)
		 ORDER BY c.relname COLLATE "C", 2`, q, app)
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var rel, priv string
		require.NoError(t, rows.Scan(&rel, &priv))
		got = append(got, rel+":"+priv)
	}
	require.NoError(t, rows.Err())
	return got
}

// TestSchemaFunctionsAreClassified: every function in a migrated schema is
// either one Grant gives the application (SECURITY DEFINER, fixed
// search_path) or the owner's (not EXECUTE-able by PUBLIC), so a function
// added by a later migration cannot slip through unclassified.
func TestSchemaFunctionsAreClassified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, admin, _ := migratedStore(t)
	rows, err := admin.Query(ctx, `SELECT p.proname, p.prosecdef, coalesce(array_to_string(p.proconfig, ';'), ''),
			p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		  FROM pg_proc p WHERE p.pronamespace = $1::regnamespace ORDER BY 1`, ident.Schema(s))
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name, config string
		var definer, public bool
		require.NoError(t, rows.Scan(&name, &definer, &config, &public))
		names = append(names, name)
		require.False(t, public, "%s is EXECUTE-able by PUBLIC", name)
		require.Contains(t, config, "search_path=pg_catalog, pg_temp", name)
		switch {
		case slices.Contains(pgdcbsql.AppFunctions, name):
			require.True(t, definer, "%s must be SECURITY DEFINER", name)
		case name == "events_append_only":
			require.False(t, definer, "the trigger must see the caller as current_user")
		case slices.Contains(pgdcbsql.OwnerFunctions, name):
			require.True(t, definer, "%s must be SECURITY DEFINER", name)
		default:
			t.Errorf("function %s is neither in sql.appFunctions nor in sql.ownerFunctions", name)
		}
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, append(slices.Clone(pgdcbsql.AppFunctions), pgdcbsql.OwnerFunctions...), names)
	var sources []string
	for _, f := range pgdcbsql.Functions() {
		sources = append(sources, f.Name)
	}
	require.ElementsMatch(t, sources, names, "one file of sql/functions per function")
}
