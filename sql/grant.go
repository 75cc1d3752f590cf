package sql

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/migrate"
)

// tableGrant is what Grant gives the application role on one of the
// library's tables.
type tableGrant struct {
	table string
	privs string
	// optional: granted only when the table exists (runstore's, created by
	// runstore.Migrate).
	optional bool
}

// tableGrants: nothing else in the schema is granted. No INSERT, UPDATE,
// DELETE or TRUNCATE on events (appends go through append_events, which runs
// as its owner), no DELETE but of a partitioned projection's worker rows
// (retention is the owner's).
var tableGrants = []tableGrant{
	// Every read, the conditions' checks and CheckTransactionIDs.
	{"events", "SELECT", false},
	// The command executor's trace row, written with the events.
	{"commands", "SELECT, INSERT", false},
	// Projections', subscriptions' and the outbox's checkpoints (created with
	// INSERT … ON CONFLICT DO NOTHING; moved, paused, reset with UPDATE) and
	// the runstore projector's checkpoint (an upsert).
	{"checkpoints", "SELECT, INSERT, UPDATE", false},
	// Partitioned projections: partitions' checkpoints and leases (created,
	// claimed, moved), and the live workers (a worker that stops deletes
	// its row, and the rows of workers long dead).
	{"projection_partitions", "SELECT, INSERT, UPDATE", false},
	{"projection_workers", "SELECT, INSERT, UPDATE, DELETE", false},
	// The runstore projector's run view (an upsert), when runstore.Migrate
	// created it. DeleteRun's DELETE is retention, the owner's.
	{"run_snapshots", "SELECT, INSERT, UPDATE", true},
	// Store.CheckSchema and CheckCurrent read them (runstore's CheckSchema
	// the last).
	{"schema_migrations", "SELECT", false},
	{"schema_functions", "SELECT", false},
	{"runstore_migrations", "SELECT", true},
	// Decision snapshots (eventstore/snapshot.go): read by Project, written
	// (an upsert) after it. Retention deletes them, as the owner.
	{"decision_snapshots", "SELECT, INSERT, UPDATE", false},
	{"decision_snapshot_epoch", "SELECT", false},
	// Which projection serves a read model's views: WaitFor reads it.
	// Claiming and switching views is DDL, the owner's.
	{"read_model_views", "SELECT", false},
	// Subjects' data keys (crypto-shredding): read by reads that open
	// sealed fields, created by the first sealed append of a subject. Erase
	// deletes them (and snapshots), as the owner.
	{"subject_keys", "SELECT, INSERT", false},
}

// maxIdentifier is PostgreSQL's longest identifier, in bytes (NAMEDATALEN-1).
const maxIdentifier = 63

// appFunctions are the schema's functions the application role may execute.
// Each runs as its owner (SECURITY DEFINER) with a fixed search_path.
var appFunctions = []string{"append_events", "append_group"}

// ownerFunctions are the schema's functions only the owner may execute:
// retention, the rebase after a restore, the import (it chooses occurred_at)
// and the append-only trigger's
// function (a trigger fires without EXECUTE privilege).
var ownerFunctions = []string{"delete_events_tagged", "rebase_transaction_ids", "import_events", "events_append_only"}

// Grant gives an existing role exactly what the library needs to run as an
// application, and nothing more, in the (migrated) schema: USAGE on the
// schema; SELECT on its tables; INSERT on commands; INSERT and UPDATE on
// checkpoints, decision_snapshots, projection_partitions and
// projection_workers (and DELETE on the last), INSERT on subject_keys, and on run_snapshots when
// runstore.Migrate created it; EXECUTE on append_events and append_group,
// which run as their owner. It first revokes whatever the role held on those objects (and
// CREATE on the schema), so running it again, or on a role granted more by
// hand, leaves exactly that. Run it on a pool connected as the schema's owner
// (the role that ran Migrate) or a superuser; any other caller gets a
// *pgdcb.InvalidArgumentError naming "pool". Run it again after each Migrate
// and runstore.Migrate: a step may add a table.
//
// It refuses, with a *pgdcb.InvalidArgumentError naming "role" and writing
// nothing, a role that does not exist, that owns the schema or the events
// table, that is a member of their owner, that is a superuser, that has
// CREATEROLE (on PostgreSQL 15 such a role can grant itself membership in the
// owner), or that would still be able to write to events, run retention or
// the rebase, or create objects in the schema through PUBLIC or another role
// it belongs to (pg_write_all_data, for example). An unmigrated schema gives
// pgdcb.ErrNotMigrated.
//
// The role's pool may then Append, AppendIf, Read and tail, run commands,
// projections, the outbox and the runstore (but not DeleteRun). See
// docs/SECURITY.md.
func Grant(ctx context.Context, pool *pgxpool.Pool, schema, role string) error {
	q, err := Quote(schema)
	if err != nil {
		return err
	}
	switch {
	case role == "":
		return &pgdcb.InvalidArgumentError{Name: "role", Reason: "must not be empty"}
	case len(role) > maxIdentifier:
		// The server would cut the name to 63 bytes: another role.
		return &pgdcb.InvalidArgumentError{Name: "role", Reason: fmt.Sprintf("longer than %d bytes (%d)", maxIdentifier, len(role))}
	case !utf8.ValidString(role) || strings.ContainsRune(role, 0):
		return &pgdcb.InvalidArgumentError{Name: "role", Reason: "not valid UTF-8 without NUL"}
	}
	if err := CheckCurrent(ctx, pool, schema); err != nil {
		return err
	}
	r := pgx.Identifier{role}.Sanitize()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Serialise with Migrate (whose session lock has the same key) and
		// with other Grants of this schema.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrate.LockKey(schema)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if err := checkCaller(ctx, tx, q); err != nil {
			return err
		}
		if err := checkRole(ctx, tx, q, schema, role); err != nil {
			return err
		}
		grants, err := presentTables(ctx, tx, q)
		if err != nil {
			return err
		}
		stmts := []string{"REVOKE ALL ON SCHEMA " + q + " FROM " + r}
		for _, g := range grants {
			stmts = append(stmts, "REVOKE ALL ON TABLE "+q+"."+g.table+" FROM "+r)
		}
		for _, f := range append(append([]string{}, appFunctions...), ownerFunctions...) {
			stmts = append(stmts, "REVOKE ALL ON FUNCTION "+q+"."+f+" FROM "+r)
		}
		stmts = append(stmts, "GRANT USAGE ON SCHEMA "+q+" TO "+r)
		for _, g := range grants {
			stmts = append(stmts, "GRANT "+g.privs+" ON TABLE "+q+"."+g.table+" TO "+r)
		}
		for _, f := range appFunctions {
			stmts = append(stmts, "GRANT EXECUTE ON FUNCTION "+q+"."+f+" TO "+r)
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		// What the role may still do through PUBLIC or the roles it belongs
		// to, which revoking from the role itself cannot take away.
		return checkLeftovers(ctx, tx, q, schema, role)
	})
	if err != nil {
		return errfmt.Errorf("pgdcb: grant %s on schema %s: %w", r, q, err)
	}
	return nil
}

// presentTables is tableGrants without the optional tables the schema lacks.
func presentTables(ctx context.Context, tx pgx.Tx, q string) ([]tableGrant, error) {
	var out []tableGrant
	for _, g := range tableGrants {
		if g.optional {
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", q+"."+g.table).Scan(&exists); err != nil {
				return nil, fmt.Errorf("checking %s: %w", g.table, err)
			}
			if !exists {
				continue
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// checkCaller refuses to run as a role that is not the owner of the events
// table, not a member of it and not a superuser: its GRANTs and REVOKEs would
// only raise warnings and change nothing.
func checkCaller(ctx context.Context, tx pgx.Tx, q string) error {
	var user string
	var ok bool
	err := tx.QueryRow(ctx, `SELECT current_user::text, pg_has_role(current_user, c.relowner, 'USAGE')
			OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
		  FROM pg_class c WHERE c.oid = ($1 || '.events')::regclass`, q).Scan(&user, &ok)
	if err != nil {
		return fmt.Errorf("reading the current role: %w", err)
	}
	if !ok {
		return &pgdcb.InvalidArgumentError{Name: "pool", Reason: fmt.Sprintf("connected as %q, which is not the owner of the schema's tables: run Grant as the role that ran Migrate", user)}
	}
	return nil
}

// checkRole refuses a role that is missing or that could bypass the
// append-only trigger.
func checkRole(ctx context.Context, tx pgx.Tx, q, schema, role string) error {
	var exists, super, createRole, owner, member bool
	err := tx.QueryRow(ctx, `
		SELECT r.oid IS NOT NULL, coalesce(r.rolsuper, false), coalesce(r.rolcreaterole, false),
		       coalesce(r.oid IN (n.nspowner, c.relowner), false),
		       coalesce(pg_has_role(r.oid, n.nspowner, 'MEMBER') OR pg_has_role(r.oid, c.relowner, 'MEMBER'), false)
		  FROM pg_namespace n
		  JOIN pg_class c ON c.oid = ($2 || '.events')::regclass
		  LEFT JOIN pg_roles r ON r.rolname = $3
		 WHERE n.nspname = $1`, schema, q, role).Scan(&exists, &super, &createRole, &owner, &member)
	if err != nil {
		return fmt.Errorf("reading the role: %w", err)
	}
	var reason string
	switch {
	case !exists:
		reason = "no such role"
	case owner:
		reason = "owns the schema or its events table: the application must run as another role (see docs/SECURITY.md)"
	case super:
		reason = "is a superuser, which bypasses every privilege and can disable triggers"
	case member:
		reason = "is a member of the owner of the schema or of its events table, so it has the owner's rights"
	case createRole:
		reason = "has CREATEROLE, with which it can make itself a member of the owner"
	default:
		return nil
	}
	return &pgdcb.InvalidArgumentError{Name: "role", Reason: fmt.Sprintf("%q %s", role, reason)}
}

// checkLeftovers refuses a role that, after the grants, could still write to
// events, run an owner function or create objects in the schema.
func checkLeftovers(ctx context.Context, tx pgx.Tx, q, schema, role string) error {
	var found []string
	for _, p := range []string{"INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER", "REFERENCES"} {
		var has bool
		if err := tx.QueryRow(ctx, "SELECT has_table_privilege($1, $2, $3)", role, q+".events", p).Scan(&has); err != nil {
			return fmt.Errorf("checking %s on events: %w", p, err)
		}
		if has {
			found = append(found, p+" on events")
		}
	}
	var colWrite, create bool
	if err := tx.QueryRow(ctx, "SELECT has_any_column_privilege($1, $2, 'INSERT, UPDATE'), has_schema_privilege($1, $3, 'CREATE')",
		role, q+".events", schema).Scan(&colWrite, &create); err != nil {
		return fmt.Errorf("checking column and schema privileges: %w", err)
	}
	if colWrite {
		found = append(found, "INSERT or UPDATE on columns of events")
	}
	if create {
		found = append(found, "CREATE on the schema")
	}
	for _, f := range ownerFunctions {
		var has bool
		if err := tx.QueryRow(ctx, "SELECT has_function_privilege($1, p.oid, 'EXECUTE') FROM pg_proc p WHERE p.pronamespace = $2::regnamespace AND p.proname = $3",
			role, q, f).Scan(&has); err != nil {
			return fmt.Errorf("checking EXECUTE on %s: %w", f, err)
		}
		if has {
			found = append(found, "EXECUTE on "+f)
		}
	}
	if len(found) > 0 {
		return &pgdcb.InvalidArgumentError{Name: "role", Reason: fmt.Sprintf("%q would still have %s through PUBLIC or a role it belongs to: revoke it there first",
			role, strings.Join(found, ", "))}
	}
	return nil
}
