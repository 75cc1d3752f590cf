// Package schemadump writes a schema's definition from the catalog, in the
// style of pg_dump -s: its tables (columns, defaults, constraints), indexes,
// functions (pg_get_functiondef, but for their bodies) and triggers, one
// statement each, in a fixed order, with the schema's name replaced. sql/schema.sql is made with it
// (docs/SCHEMA.md).
package schemadump

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DB is what a pool, a connection or a transaction offers.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Statements returns the schema's definition, one statement a string (no
// trailing newline), each ending with ";": tables by name, then indexes not
// behind a constraint by name, then functions by name (their headers, each
// with its REVOKE from PUBLIC when PUBLIC may not execute it; see functions),
// then triggers by name. Every
// occurrence of the schema's name, quoted or not, reads as as.
func Statements(ctx context.Context, db DB, schema, as string) ([]string, error) {
	var out []string
	tables, err := strs(ctx, db, `SELECT c.oid::text FROM pg_class c
		WHERE c.relnamespace = $1::regnamespace AND c.relkind IN ('r', 'p') ORDER BY c.relname COLLATE "C"`, pgx.Identifier{schema}.Sanitize())
	if err != nil {
		return nil, err
	}
	for _, oid := range tables {
		t, err := table(ctx, db, oid)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	// Indexes (a constraint's index is in its table's statement).
	idx, err := strs(ctx, db, `SELECT pg_get_indexdef(i.indexrelid) || ';' FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relnamespace = $1::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x'))
		ORDER BY c.relname COLLATE "C"`, pgx.Identifier{schema}.Sanitize())
	if err != nil {
		return nil, err
	}
	out = append(out, idx...)
	fns, err := functions(ctx, db, schema, as)
	if err != nil {
		return nil, err
	}
	out = append(out, fns...)
	trg, err := strs(ctx, db, `SELECT pg_get_triggerdef(t.oid) || ';' FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE c.relnamespace = $1::regnamespace AND NOT t.tgisinternal ORDER BY t.tgname COLLATE "C"`, pgx.Identifier{schema}.Sanitize())
	if err != nil {
		return nil, err
	}
	out = append(out, trg...)
	for i, s := range out {
		out[i] = normalise(s, schema, as)
	}
	return out, nil
}

// normalise replaces the schema's name, quoted or not, with as.
func normalise(s, schema, as string) string {
	s = strings.ReplaceAll(s, pgx.Identifier{schema}.Sanitize(), as)
	return strings.ReplaceAll(s, schema, as)
}

// functions are the CREATE FUNCTION statements of pg_get_functiondef without
// their bodies: each body is the one source file sql/functions/NAME.sql
// (repeating it here would restate every function), named with a SHA-256 of
// the body the server holds (the schema's name normalised), so a changed
// body changes this text too.
func functions(ctx context.Context, db DB, schema, as string) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT p.proname::text, pg_get_functiondef(p.oid), p.prosrc,
			CASE WHEN p.proacl IS NOT NULL AND NOT EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
			     THEN 'REVOKE ALL ON FUNCTION ' || p.oid::regprocedure::text || ' FROM PUBLIC;' ELSE '' END
		FROM pg_proc p WHERE p.pronamespace = $1::regnamespace ORDER BY p.proname COLLATE "C", p.oid::regprocedure::text COLLATE "C"`,
		pgx.Identifier{schema}.Sanitize())
	if err != nil {
		return nil, fmt.Errorf("schemadump: %w", err)
	}
	var out []string
	for rows.Next() {
		var name, def, src, revoke string
		if err := rows.Scan(&name, &def, &src, &revoke); err != nil {
			return nil, fmt.Errorf("schemadump: %w", err)
		}
		head, _, ok := strings.Cut(def, "\nAS $function$")
		if !ok {
			return nil, fmt.Errorf("schemadump: function %s: no body in %q", name, def)
		}
		// The attributes (RETURNS, LANGUAGE, SET …) on one line after the
		// signature's.
		sig, attrs, _ := strings.Cut(head, "\n")
		head = sig + "\n" + strings.Join(strings.Fields(attrs), " ")
		sum := sha256.Sum256([]byte(normalise(src, schema, as)))
		stmt := head + "\nAS $function$ ... $function$; -- body: sql/functions/" + name + ".sql (sha256 " + hex.EncodeToString(sum[:8]) + ")"
		if revoke != "" {
			stmt += "\n" + revoke
		}
		out = append(out, stmt)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("schemadump: %w", err)
	}
	return out, nil
}

// table is one CREATE TABLE: columns in order, then constraints by name.
func table(ctx context.Context, db DB, oid string) (string, error) {
	rows, err := db.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c WHERE c.oid = $1::oid`, oid)
	if err != nil {
		return "", err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(names) != 1 {
		return "", fmt.Errorf("schemadump: table %s: %v", oid, err)
	}
	cols, err := strs(ctx, db, `SELECT quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
			|| CASE a.attidentity WHEN 'a' THEN ' GENERATED ALWAYS AS IDENTITY' WHEN 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY' ELSE '' END
			|| CASE WHEN a.attgenerated = 's' THEN ' GENERATED ALWAYS AS (' || pg_get_expr(d.adbin, d.adrelid) || ') STORED'
			        WHEN d.adbin IS NOT NULL THEN ' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) ELSE '' END
			|| CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
		  FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		 WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return "", err
	}
	cons, err := strs(ctx, db, `SELECT 'CONSTRAINT ' || quote_ident(conname) || ' ' || pg_get_constraintdef(oid)
		  FROM pg_constraint WHERE conrelid = $1::oid ORDER BY conname COLLATE "C"`, oid)
	if err != nil {
		return "", err
	}
	return "CREATE TABLE " + names[0] + " (\n    " + strings.Join(append(cols, cons...), ",\n    ") + "\n);", nil
}

func strs(ctx context.Context, db DB, sql string, args ...any) ([]string, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("schemadump: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("schemadump: %w", err)
	}
	return out, nil
}
