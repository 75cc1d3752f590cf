// Package migrate is the migrator behind sql.Migrate and runstore.Migrate: a
// Line is a sequence of numbered steps recorded in a table of the schema,
// plus (for the core line) the server functions, applied again whenever
// their text changes. Every migrator of a schema serialises on one advisory
// lock keyed by the schema name, whatever its line, and runs each step in a
// transaction together with its record.
package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// Placeholder is replaced by the quoted schema name in every text a Line
// applies.
const Placeholder = "{{schema}}"

// Migration is one numbered step.
type Migration struct {
	Version int
	Name    string
	SQL     string // with the {{schema}} placeholder
}

// Checksum is the SHA-256 of the step's SQL text (before the schema is filled
// in), hex-encoded.
func (m Migration) Checksum() string { return checksum(m.SQL) }

// Render returns the step's SQL for the given (already quoted) schema.
func (m Migration) Render(quotedSchema string) string {
	return strings.ReplaceAll(m.SQL, Placeholder, quotedSchema)
}

// Function is one server function's source, rendered from its template (with
// the {{schema}} placeholder): CREATE OR REPLACE statements, applied whenever
// its checksum differs from the one recorded.
type Function struct {
	Name string
	SQL  string
}

// Checksum is the SHA-256 of the function's rendered text, hex-encoded.
func (f Function) Checksum() string { return checksum(f.SQL) }

// Render returns the function's SQL for the given (already quoted) schema.
func (f Function) Render(quotedSchema string) string {
	return strings.ReplaceAll(f.SQL, Placeholder, quotedSchema)
}

func checksum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Status says whether a step is applied, when, and with which text.
type Status struct {
	Migration
	Applied   bool
	AppliedAt time.Time
	// AppliedChecksum is the checksum recorded when the step was applied;
	// empty for steps applied before checksums were recorded.
	AppliedChecksum string
	// Drift: the step was applied from another text than this library's
	// (AppliedChecksum differs from Checksum).
	Drift bool
}

// Steps reads the numbered steps NNN_name.sql of dir in fsys, in version
// order. It panics on a file without a number or two steps with one number:
// the files are embedded at build time.
func Steps(fsys fs.FS, dir string) []Migration {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		panic(err)
	}
	var out []Migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("pgdcb: migration file without a numeric prefix: " + e.Name())
		}
		body, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			panic(fmt.Sprintf("pgdcb: two migrations numbered %d", out[i].Version))
		}
	}
	return out
}

// Line is one sequence of numbered steps and the functions applied after
// them.
type Line struct {
	// Op starts every error ("pgdcb: migrate", "pgdcb: migrate runstore").
	Op string
	// Title starts Script's text ("pgdcb migrations").
	Title string
	// Table records the applied steps (in the schema): "schema_migrations".
	Table string
	// Hint says how to migrate, in ErrNotMigrated's message.
	Hint string
	// Steps are the numbered steps, in version order.
	Steps []Migration
	// Functions are applied after the steps, in order, in one transaction,
	// when any of their checksums differs from the one recorded in
	// schema_functions.
	Functions []Function
}

// FunctionTable records the applied functions' checksums.
const FunctionTable = "schema_functions"

// LockKey is the advisory lock key every migrator of schema takes (and
// sql.Grant with them).
func LockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("pgdcb.migrate\x00" + schema))
	return int64(h.Sum64())
}

// Latest is the highest step version.
func (l *Line) Latest() int { return l.Steps[len(l.Steps)-1].Version }

// DB is what a pooled connection and a transaction offer.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migrate applies every step not yet applied to the schema (q is its quoted
// name, schema the plain one), creating the schema if needed, then the
// functions that changed. It returns the versions it applied.
func (l *Line) Migrate(ctx context.Context, pool *pgxpool.Pool, schema, q string) ([]int, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, errfmt.Errorf("%s: %w", l.Op, err)
	}
	defer conn.Release()

	// A session lock, so concurrent migrators of the same schema run one after
	// another; released below even when a step fails.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", LockKey(schema)); err != nil {
		return nil, errfmt.Errorf("%s: lock: %w", l.Op, err)
	}
	defer func() {
		// The caller's ctx may be done; unlock must still run or the pooled
		// session keeps the lock.
		ctx2, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx2, "SELECT pg_advisory_unlock($1)", LockKey(schema)); err != nil {
			conn.Conn().Close(ctx2) // drop the session, and its lock, with it
		}
	}()

	// Each step in its own transaction, with its version row; the functions
	// together in one more.
	inTx := func(f func(tx pgx.Tx) error) error { return pgx.BeginFunc(ctx, conn, f) }
	return l.apply(ctx, conn, q, inTx)
}

// MigrateTx is Migrate in the caller's transaction, under a
// transaction-level advisory lock (held until tx ends).
func (l *Line) MigrateTx(ctx context.Context, tx pgx.Tx, schema, q string) ([]int, error) {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", LockKey(schema)); err != nil {
		return nil, errfmt.Errorf("%s: lock: %w", l.Op, err)
	}
	return l.apply(ctx, tx, q, func(f func(tx pgx.Tx) error) error { return f(tx) })
}

// apply runs the bootstrap on db, then each step the schema lacks, in order,
// then the functions that changed; inTx runs one unit in a transaction.
func (l *Line) apply(ctx context.Context, db DB, q string, inTx func(func(pgx.Tx) error) error) ([]int, error) {
	for _, stmt := range l.bootstrap(q) {
		if _, err := db.Exec(ctx, stmt); err != nil {
			return nil, errfmt.Errorf("%s: prepare %s: %w", l.Op, q, err)
		}
	}
	applied, err := l.applied(ctx, db, q)
	if err != nil {
		return nil, err
	}
	if err := l.unknownSteps(q, applied); err != nil {
		return nil, err
	}
	var done []int
	for _, m := range l.Steps {
		if _, ok := applied[m.Version]; ok {
			continue
		}
		err := inTx(func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.Render(q)); err != nil {
				return err
			}
			// The line table's primary key (version).
			_, err := tx.Exec(ctx, "INSERT INTO "+q+"."+l.Table+" (version, name, checksum) VALUES ($1, $2, $3)",
				m.Version, m.Name, m.Checksum())
			return err
		})
		if err != nil {
			return done, errfmt.Errorf("%s %s: step %03d_%s: %w", l.Op, q, m.Version, m.Name, err)
		}
		done = append(done, m.Version)
	}
	if len(l.Functions) == 0 {
		return done, nil
	}
	// The functions, in one transaction: those whose recorded checksum
	// differs (a fresh schema, or a library whose function text changed).
	err = inTx(func(tx pgx.Tx) error {
		stale, err := l.staleFunctions(ctx, tx, q)
		if err != nil {
			return err
		}
		for _, f := range stale {
			if _, err := tx.Exec(ctx, f.Render(q)); err != nil {
				return fmt.Errorf("function %s: %w", f.Name, err)
			}
			// schema_functions' primary key (name).
			if _, err := tx.Exec(ctx, "INSERT INTO "+q+"."+FunctionTable+` (name, checksum) VALUES ($1, $2)
				ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()`, f.Name, f.Checksum()); err != nil {
				return fmt.Errorf("function %s: %w", f.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return done, errfmt.Errorf("%s %s: %w", l.Op, q, err)
	}
	return done, nil
}

// staleFunctions returns the functions whose recorded checksum is missing or
// differs from the library's.
func (l *Line) staleFunctions(ctx context.Context, db DB, q string) ([]Function, error) {
	// A few rows (one per function), read whole.
	rows, err := db.Query(ctx, "SELECT name, checksum FROM "+q+"."+FunctionTable)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", FunctionTable, err)
	}
	recorded, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var v [2]string
		return v, r.Scan(&v[0], &v[1])
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", FunctionTable, err)
	}
	have := map[string]string{}
	for _, r := range recorded {
		have[r[0]] = r[1]
	}
	var stale []Function
	for _, f := range l.Functions {
		if have[f.Name] != f.Checksum() {
			stale = append(stale, f)
		}
	}
	return stale, nil
}

// unknownSteps refuses a schema that has applied a step this library does
// not have: a newer pgdcb migrated it (its steps and server functions are
// not this library's: neither run against it nor rewrite its functions with
// older text), or a pre-release one whose steps were since squashed into the
// current ones (applying these on top would fail halfway or leave a mixed
// schema).
func (l *Line) unknownSteps(q string, applied map[int]appliedStep) error {
	known := map[int]bool{}
	for _, m := range l.Steps {
		known[m.Version] = true
	}
	var unknown []int
	for v := range applied {
		if !known[v] {
			unknown = append(unknown, v)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Ints(unknown)
	if unknown[0] > l.Latest() {
		return fmt.Errorf("%w: schema %s was migrated by a newer pgdcb (step(s) %v of %s; this library has steps up to %d): use that pgdcb version or a later one",
			pgdcb.ErrMigrationDrift, q, unknown, l.Table, l.Latest())
	}
	return fmt.Errorf("%w: schema %s has applied step(s) %v of %s, which this library does not have (migrated by a pre-release pgdcb whose migrations were squashed): migrate a new schema and copy the log with `pgdcb export` / `pgdcb import`",
		pgdcb.ErrMigrationDrift, q, unknown, l.Table)
}

// Script returns the SQL that migrates a schema from step after (0: from
// nothing) to the latest: the bootstrap, then each step in its own
// transaction with its version row, then the functions in one transaction
// with their checksums, exactly as Migrate applies them.
func (l *Line) Script(q string, after int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- %s for schema %s, after step %d, up to %d.\n", l.Title, q, after, l.Latest())
	for _, stmt := range l.bootstrap(q) {
		b.WriteString(stmt + ";\n")
	}
	for _, m := range l.Steps {
		if m.Version <= after {
			continue
		}
		fmt.Fprintf(&b, "\n-- step %03d_%s (checksum %s)\nBEGIN;\n%s\n", m.Version, m.Name, m.Checksum(), strings.TrimSpace(m.Render(q)))
		fmt.Fprintf(&b, "INSERT INTO %s.%s (version, name, checksum) VALUES (%d, '%s', '%s');\nCOMMIT;\n",
			q, l.Table, m.Version, m.Name, m.Checksum())
	}
	if len(l.Functions) > 0 {
		b.WriteString("\n-- the server functions (applied again whenever their checksum changes)\nBEGIN;\n")
		for _, f := range l.Functions {
			fmt.Fprintf(&b, "\n-- function %s (checksum %s)\n%s\n", f.Name, f.Checksum(), strings.TrimSpace(f.Render(q)))
			fmt.Fprintf(&b, "INSERT INTO %s.%s (name, checksum) VALUES ('%s', '%s')\n    ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now();\n",
				q, FunctionTable, f.Name, f.Checksum())
		}
		b.WriteString("COMMIT;\n")
	}
	return b.String()
}

// bootstrap is what every migrator of the line runs first: the schema and
// its tables of records. Checksums came later than the core's table: schemas
// migrated before have steps without one.
func (l *Line) bootstrap(q string) []string {
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + q,
		`CREATE TABLE IF NOT EXISTS ` + q + `.` + l.Table + ` (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`,
		`ALTER TABLE ` + q + `.` + l.Table + ` ADD COLUMN IF NOT EXISTS checksum text`,
	}
	if len(l.Functions) > 0 {
		stmts = append(stmts, `CREATE TABLE IF NOT EXISTS `+q+`.`+FunctionTable+` (
		name       text        PRIMARY KEY,
		checksum   text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	}
	return stmts
}

// appliedStep is one row of the line's table.
type appliedStep struct {
	at       time.Time
	checksum string
}

func (l *Line) applied(ctx context.Context, db DB, q string) (map[int]appliedStep, error) {
	// A few rows (one per step), read whole. to_jsonb(m)->>'checksum' reads
	// the column when it exists and NULL when the schema was migrated before
	// it was added.
	rows, err := db.Query(ctx, "SELECT version, applied_at, coalesce(to_jsonb(m)->>'checksum', '') FROM "+q+"."+l.Table+" m")
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: read %s: %w", l.Table, err)
	}
	out := map[int]appliedStep{}
	for rows.Next() {
		var v int
		var a appliedStep
		if err := rows.Scan(&v, &a.at, &a.checksum); err != nil {
			return nil, err
		}
		out[v] = a
	}
	return out, rows.Err()
}

// Status reports every step and whether it is applied in the schema. A
// schema that does not exist yet reports every step as not applied.
func (l *Line) Status(ctx context.Context, db DB, q string) ([]Status, error) {
	st, _, err := l.status(ctx, db, q)
	return st, err
}

// status is Status and the applied steps, this library's or not.
func (l *Line) status(ctx context.Context, db DB, q string) ([]Status, map[int]appliedStep, error) {
	var exists bool
	if err := db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", q+"."+l.Table).Scan(&exists); err != nil {
		return nil, nil, errfmt.Errorf("pgdcb: migration status: %w", err)
	}
	applied := map[int]appliedStep{}
	if exists {
		var err error
		if applied, err = l.applied(ctx, db, q); err != nil {
			return nil, nil, err
		}
	}
	var out []Status
	for _, m := range l.Steps {
		a, ok := applied[m.Version]
		out = append(out, Status{Migration: m, Applied: ok, AppliedAt: a.at, AppliedChecksum: a.checksum,
			Drift: a.checksum != "" && a.checksum != m.Checksum()})
	}
	return out, applied, nil
}

// CheckCurrent returns an error matching pgdcb.ErrNotMigrated unless every
// step is applied to the schema and every function at this library's text,
// and one matching pgdcb.ErrMigrationDrift when a step was applied from
// another text than this library's or the schema has a step this library
// does not have (a newer pgdcb migrated it).
func (l *Line) CheckCurrent(ctx context.Context, db DB, schema, q string) error {
	st, applied, err := l.status(ctx, db, q)
	if err != nil {
		return err
	}
	if err := l.unknownSteps(q, applied); err != nil {
		return err
	}
	for _, s := range st {
		if !s.Applied {
			return fmt.Errorf("%w: schema %q lacks step %03d_%s of %s (run %s)", pgdcb.ErrNotMigrated, schema, s.Version, s.Name, l.Table, l.Hint)
		}
		if s.Drift {
			return fmt.Errorf("%w: schema %q applied step %03d_%s of %s from another text (checksum %.12s…, this library's %.12s…)",
				pgdcb.ErrMigrationDrift, schema, s.Version, s.Name, l.Table, s.AppliedChecksum, s.Checksum())
		}
	}
	if len(l.Functions) == 0 {
		return nil
	}
	var exists bool
	if err := db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", q+"."+FunctionTable).Scan(&exists); err != nil {
		return errfmt.Errorf("pgdcb: migration status: %w", err)
	}
	stale := l.Functions
	if exists {
		if stale, err = l.staleFunctions(ctx, db, q); err != nil {
			return errfmt.Errorf("pgdcb: migration status: %w", err)
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("%w: schema %q lacks this library's text of function %s (run %s)", pgdcb.ErrNotMigrated, schema, stale[0].Name, l.Hint)
	}
	return nil
}
