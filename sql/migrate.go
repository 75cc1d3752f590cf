// Package sql holds pgdcb's schema as numbered, embedded migrations and the
// migrator that applies them.
//
// Every object lives in one schema (default "pgdcb") whose name is quoted into
// each statement; nothing relies on search_path. Concurrent migrators are safe:
// they serialise on a session advisory lock keyed by the schema name, and each
// step runs in a transaction together with its version row.
package sql

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// DefaultSchema is the schema used when none is configured.
const DefaultSchema = "pgdcb"

// Migration is one numbered step.
type Migration struct {
	Version int
	Name    string
	SQL     string // with the {{schema}} placeholder
}

// Checksum is the SHA-256 of the step's SQL text (before the schema is filled
// in), hex-encoded. Migrate records it with the step; a step whose text
// changed after it was applied shows as drift (see CheckCurrent).
func (m Migration) Checksum() string {
	sum := sha256.Sum256([]byte(m.SQL))
	return hex.EncodeToString(sum[:])
}

// MigrationStatus says whether a step is applied, when, and with which text.
type MigrationStatus struct {
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

// InvalidSchemaError names a schema name that was refused.
type InvalidSchemaError struct{ Name string }

func (e *InvalidSchemaError) Error() string {
	return fmt.Sprintf("pgdcb: invalid schema name %q: use 1-63 characters of [a-z0-9_], starting with a letter or '_'", e.Name)
}

// Is makes errors.Is(err, pgdcb.ErrInvalidSchema) true.
func (e *InvalidSchemaError) Is(target error) bool { return target == pgdcb.ErrInvalidSchema }

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateSchema refuses names that would need quoting (quotes, spaces, upper
// case), so a schema name never changes the meaning of a statement.
func ValidateSchema(name string) error {
	if !schemaRE.MatchString(name) {
		return &InvalidSchemaError{Name: name}
	}
	return nil
}

// Quote returns the schema name as a quoted identifier, after validating it.
func Quote(schema string) (string, error) {
	if err := ValidateSchema(schema); err != nil {
		return "", err
	}
	return pgx.Identifier{schema}.Sanitize(), nil
}

// Migrations returns the embedded steps in version order.
func Migrations() []Migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err) // embedded at build time
	}
	var out []Migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("pgdcb: migration file without a numeric prefix: " + e.Name())
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
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

// LatestVersion is the highest embedded migration version.
func LatestVersion() int { m := Migrations(); return m[len(m)-1].Version }

// Render returns the step's SQL for the given (already validated) schema.
func (m Migration) Render(quotedSchema string) string {
	return strings.ReplaceAll(m.SQL, "{{schema}}", quotedSchema)
}

func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("pgdcb.migrate\x00" + schema))
	return int64(h.Sum64())
}

// Migrate applies every step not yet applied to the schema, creating the schema
// if needed. It returns the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
	q, err := Quote(schema)
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgdcb: migrate: %w", err)
	}
	defer conn.Release()

	// A session lock, so concurrent migrators of the same schema run one after
	// another; released below even when a step fails.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey(schema)); err != nil {
		return nil, fmt.Errorf("pgdcb: migrate: lock: %w", err)
	}
	defer func() {
		// The caller's ctx may be done; unlock must still run or the pooled
		// session keeps the lock.
		ctx2, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx2, "SELECT pg_advisory_unlock($1)", lockKey(schema)); err != nil {
			conn.Conn().Close(ctx2) // drop the session, and its lock, with it
		}
	}()

	// Each step in its own transaction, with its version row.
	return applyPending(ctx, conn, q, func(m Migration) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return applyStep(ctx, tx, q, m) })
	})
}

// MigrateTx is Migrate in the caller's transaction: every pending step and
// its version row are written in tx, so they commit or roll back with the
// caller's own changes. It serialises with other migrators of the schema
// through a transaction-level advisory lock (held until tx ends).
func MigrateTx(ctx context.Context, tx pgx.Tx, schema string) ([]int, error) {
	q, err := Quote(schema)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(schema)); err != nil {
		return nil, fmt.Errorf("pgdcb: migrate: lock: %w", err)
	}
	return applyPending(ctx, tx, q, func(m Migration) error { return applyStep(ctx, tx, q, m) })
}

// applyPending runs the bootstrap on db, then apply for every step the
// schema lacks, in order; it returns the versions applied.
func applyPending(ctx context.Context, db execQuerier, q string, apply func(Migration) error) ([]int, error) {
	for _, stmt := range bootstrap(q) {
		if _, err := db.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("pgdcb: migrate: prepare %s: %w", q, err)
		}
	}
	applied, err := appliedVersions(ctx, db, q)
	if err != nil {
		return nil, err
	}
	if err := unknownSteps(q, applied); err != nil {
		return nil, err
	}
	var done []int
	for _, m := range Migrations() {
		if _, ok := applied[m.Version]; ok {
			continue
		}
		if err := apply(m); err != nil {
			return done, fmt.Errorf("pgdcb: migrate %s: step %03d_%s: %w", q, m.Version, m.Name, err)
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// unknownSteps refuses a schema that has applied a step this library does
// not have: a newer pgdcb migrated it, or a pre-release one whose steps were
// since squashed into the current ones (applying these on top would fail
// halfway or leave a mixed schema).
func unknownSteps(q string, applied map[int]appliedStep) error {
	known := map[int]bool{}
	for _, m := range Migrations() {
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
	return fmt.Errorf("%w: schema %s has applied step(s) %v, which this library does not have (migrated by a newer pgdcb, or by a pre-release one whose migrations were squashed): migrate a new schema and copy the log with `pgdcb export` / `pgdcb import`",
		pgdcb.ErrMigrationDrift, q, unknown)
}

// Script returns the SQL that migrates a schema from step after (0: from
// nothing) to the latest, for teams that run migrations with their own tool:
// the schema and its schema_migrations table, then each step in its own
// transaction with its version row, exactly as Migrate applies them.
func Script(schema string, after int) (string, error) {
	q, err := Quote(schema)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- pgdcb migrations for schema %s, after step %d, up to %d.\n", q, after, LatestVersion())
	for _, stmt := range bootstrap(q) {
		b.WriteString(stmt + ";\n")
	}
	for _, m := range Migrations() {
		if m.Version <= after {
			continue
		}
		fmt.Fprintf(&b, "\n-- step %03d_%s (checksum %s)\nBEGIN;\n%s\n", m.Version, m.Name, m.Checksum(), strings.TrimSpace(m.Render(q)))
		fmt.Fprintf(&b, "INSERT INTO %s.schema_migrations (version, name, checksum) VALUES (%d, '%s', '%s');\nCOMMIT;\n",
			q, m.Version, m.Name, m.Checksum())
	}
	return b.String(), nil
}

// bootstrap is what every migrator runs first: the schema and its
// schema_migrations table. Checksums came later than the table: schemas
// migrated before have steps without one.
func bootstrap(q string) []string {
	return []string{
		"CREATE SCHEMA IF NOT EXISTS " + q,
		`CREATE TABLE IF NOT EXISTS ` + q + `.schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`,
		`ALTER TABLE ` + q + `.schema_migrations ADD COLUMN IF NOT EXISTS checksum text`,
	}
}

// applyStep runs one step and records it, in tx.
func applyStep(ctx context.Context, tx pgx.Tx, q string, m Migration) error {
	if _, err := tx.Exec(ctx, m.Render(q)); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+q+".schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
		m.Version, m.Name, m.Checksum())
	return err
}

// querier is what a pooled connection and a transaction offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// execQuerier can also execute.
type execQuerier interface {
	querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// appliedStep is one row of schema_migrations.
type appliedStep struct {
	at       time.Time
	checksum string
}

func appliedVersions(ctx context.Context, conn querier, q string) (map[int]appliedStep, error) {
	// to_jsonb(m)->>'checksum' reads the column when it exists and NULL when
	// the schema was migrated before it was added.
	rows, err := conn.Query(ctx, "SELECT version, applied_at, coalesce(to_jsonb(m)->>'checksum', '') FROM "+q+".schema_migrations m")
	if err != nil {
		return nil, fmt.Errorf("pgdcb: read schema_migrations: %w", err)
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

// Status reports every embedded step and whether it is applied in the schema.
// A schema that does not exist yet reports every step as not applied.
func Status(ctx context.Context, pool *pgxpool.Pool, schema string) ([]MigrationStatus, error) {
	q, err := Quote(schema)
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", q+".schema_migrations").Scan(&exists); err != nil {
		return nil, fmt.Errorf("pgdcb: migration status: %w", err)
	}
	applied := map[int]appliedStep{}
	if exists {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Release()
		if applied, err = appliedVersions(ctx, conn, q); err != nil {
			return nil, err
		}
	}
	var out []MigrationStatus
	for _, m := range Migrations() {
		a, ok := applied[m.Version]
		out = append(out, MigrationStatus{Migration: m, Applied: ok, AppliedAt: a.at, AppliedChecksum: a.checksum,
			Drift: a.checksum != "" && a.checksum != m.Checksum()})
	}
	return out, nil
}

// CheckCurrent returns an error matching pgdcb.ErrNotMigrated unless every
// embedded step is applied to the schema, and one matching
// pgdcb.ErrMigrationDrift when a step was applied from another text than
// this library's (an edited migration: the schema may lack what the edit
// added).
func CheckCurrent(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	st, err := Status(ctx, pool, schema)
	if err != nil {
		return err
	}
	for _, s := range st {
		if !s.Applied {
			return fmt.Errorf("%w: schema %q lacks step %03d_%s (run sql.Migrate or `pgdcb migrate`)", pgdcb.ErrNotMigrated, schema, s.Version, s.Name)
		}
		if s.Drift {
			return fmt.Errorf("%w: schema %q applied step %03d_%s from another text (checksum %.12s…, this library's %.12s…)",
				pgdcb.ErrMigrationDrift, schema, s.Version, s.Name, s.AppliedChecksum, s.Checksum())
		}
	}
	return nil
}
