package projection

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
)

// maxIdentifier is PostgreSQL's longest identifier, in bytes.
const maxIdentifier = 63

// qualify returns name ("table" in schema, or "schema.table") quoted and
// schema-qualified, or a *pgdcb.InvalidArgumentError naming field.
func qualify(field, schema, name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) == 1 {
		parts = []string{schema, name}
	}
	for _, p := range parts {
		if len(parts) > 2 || p == "" || len(p) > maxIdentifier || !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 {
			return "", &pgdcb.InvalidArgumentError{Name: field, Reason: fmt.Sprintf("%q is not \"table\" or \"schema.table\" (identifiers of 1..63 bytes of UTF-8 without NUL)", name)}
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// readModel is Config.Tables and Config.Views, quoted and schema-qualified.
type readModel struct {
	tables, views []string
}

// newReadModel checks Config.Tables and Config.Views.
func newReadModel(schema string, tables, views []string) (readModel, error) {
	var m readModel
	if len(views) > 0 && len(views) != len(tables) {
		return m, &pgdcb.InvalidArgumentError{Name: "Config.Views", Reason: fmt.Sprintf("%d views for %d tables: one view per table, or none", len(views), len(tables))}
	}
	seen := map[string]bool{}
	for i, t := range tables {
		q, err := qualify("Config.Tables", schema, t)
		if err != nil {
			return m, err
		}
		m.tables = append(m.tables, q)
		if seen[q] {
			return m, &pgdcb.InvalidArgumentError{Name: "Config.Tables", Reason: fmt.Sprintf("%s is named twice", q)}
		}
		seen[q] = true
		if len(views) > 0 {
			v, err := qualify("Config.Views", schema, views[i])
			if err != nil {
				return m, err
			}
			if seen[v] {
				return m, &pgdcb.InvalidArgumentError{Name: "Config.Views", Reason: fmt.Sprintf("%s is named twice, or is also a table", v)}
			}
			seen[v] = true
			m.views = append(m.views, v)
		}
	}
	return m, nil
}

// register creates the projection's checkpoint row if there is none and
// records its read model's tables and views with it; a view no projection
// serves yet is created over this projection's table and recorded as served
// by it. Runners call it once, before their first election and in Reset.
func (r *Runner) register(ctx context.Context) error {
	pool := r.store.Pool()
	schema := ident.Schema(r.store)
	if len(r.rm.tables) == 0 {
		return ensure(ctx, pool, schema, r.name)
	}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if err := ensure(ctx, tx, schema, r.name); err != nil {
			return err
		}
		// checkpoints primary key; written only when it changed.
		_, err := tx.Exec(ctx, `UPDATE `+schema+`.checkpoints SET read_model = $2, views = $3
			WHERE name = $1 AND (read_model IS DISTINCT FROM $2 OR views IS DISTINCT FROM $3)`, r.name, r.rm.tables, r.rm.views)
		if err != nil {
			return err
		}
		for i, v := range r.rm.views {
			// read_model_views primary key. Read first: a view already
			// served needs no INSERT privilege (the application role has
			// SELECT only).
			var served bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+schema+`.read_model_views WHERE view_name = $1)`, v).Scan(&served); err != nil {
				return err
			}
			if served {
				continue
			}
			// The first projection to register a view serves it.
			tag, err := tx.Exec(ctx, `INSERT INTO `+schema+`.read_model_views (view_name, projection, table_name)
				VALUES ($1, $2, $3) ON CONFLICT (view_name) DO NOTHING`, v, r.name, r.rm.tables[i])
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				if err := pointView(ctx, tx, v, r.rm.tables[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return errfmt.Errorf("pgdcb: projection %q: registering the read model: %w", r.name, err)
	}
	return nil
}

// pointView (re)creates view over table, in tx. Both names are quoted by
// qualify; they are parsed again by the server (parse_ident) so that a name
// read back from the checkpoints table is never more than a name.
func pointView(ctx context.Context, tx pgx.Tx, view, table string) error {
	var v, t string
	err := tx.QueryRow(ctx, `SELECT (SELECT string_agg(quote_ident(p), '.') FROM unnest(parse_ident($1)) p),
		(SELECT string_agg(quote_ident(p), '.') FROM unnest(parse_ident($2)) p)`, view, table).Scan(&v, &t)
	if err != nil {
		return fmt.Errorf("view %s over %s: %w", view, table, err)
	}
	// A view, not CREATE OR REPLACE: the new table's columns may differ.
	if _, err := tx.Exec(ctx, `DROP VIEW IF EXISTS `+v); err != nil {
		return fmt.Errorf("view %s: %w", view, err)
	}
	if _, err := tx.Exec(ctx, `CREATE VIEW `+v+` AS SELECT * FROM `+t); err != nil {
		return fmt.Errorf("view %s over %s: %w", view, table, err)
	}
	return nil
}

// clearReadModel empties the tables registered with checkpoint name, in tx,
// before the checkpoint row is locked: it locks them first, against the
// writers (a batch locks its rows, then the checkpoint row: the same order,
// so the two cannot deadlock), and deletes their rows (DELETE, not
// TRUNCATE: readers keep seeing the old rows until the reset commits, in
// every isolation level). It returns the tables it emptied.
func clearReadModel(ctx context.Context, tx pgx.Tx, store *eventstore.Store, name string) ([]string, error) {
	schema := ident.Schema(store)
	var names []string
	// checkpoints primary key.
	err := tx.QueryRow(ctx, `SELECT coalesce(read_model, '{}') FROM `+schema+`.checkpoints WHERE name = $1`, name).Scan(&names)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	// The server resolves each recorded name (to_regclass parses a name,
	// nothing else) and quotes it again.
	rows, err := tx.Query(ctx, `SELECT n.name, coalesce(c.relkind::text, ''), coalesce(quote_ident(s.nspname) || '.' || quote_ident(c.relname), '')
		FROM unnest($1::text[]) WITH ORDINALITY n(name, i)
		LEFT JOIN pg_class c ON c.oid = to_regclass(n.name)
		LEFT JOIN pg_namespace s ON s.oid = c.relnamespace ORDER BY n.i`, names)
	if err != nil {
		return nil, err
	}
	quoted, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var n, kind, q string
		if err := row.Scan(&n, &kind, &q); err != nil {
			return "", err
		}
		if kind != "r" && kind != "p" {
			return "", fmt.Errorf("the read model's table %s does not exist (or is not a table): nothing was reset", n)
		}
		return q, nil
	})
	if err != nil {
		return nil, err
	}
	list := strings.Join(quoted, ", ")
	if _, err := tx.Exec(ctx, `LOCK TABLE `+list+` IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return nil, err
	}
	var again []string
	// checkpoints primary key; the row lock orders us with a leader's
	// checkpoint update.
	err = tx.QueryRow(ctx, `SELECT coalesce(read_model, '{}') FROM `+schema+`.checkpoints WHERE name = $1 FOR UPDATE`, name).Scan(&again)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(again, names) {
		return nil, fmt.Errorf("the read model's tables changed during the reset (%v, now %v): nothing was reset; try again", names, again)
	}
	for _, q := range quoted {
		if _, err := tx.Exec(ctx, `DELETE FROM `+q); err != nil {
			return nil, err
		}
	}
	return names, nil
}
