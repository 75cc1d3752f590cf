package sql_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Every file of sql/functions renders to one CREATE OR REPLACE of its
// function, with nothing of the template left but the schema placeholder;
// the append functions share the check text (written once, in
// _append.sql), not a nested call.
func TestFunctionsRender(t *testing.T) {
	t.Parallel()
	fns := pgdcbsql.Functions()
	var names []string
	byName := map[string]string{}
	for _, f := range fns {
		names = append(names, f.Name)
		byName[f.Name] = f.SQL
		require.Contains(t, f.SQL, "CREATE OR REPLACE FUNCTION {{schema}}."+f.Name+"(", f.Name)
		require.NotContains(t, strings.ReplaceAll(f.SQL, "{{schema}}", ""), "{{", f.Name)
		require.NotContains(t, f.SQL, "CREATE FUNCTION", "%s: CREATE OR REPLACE, so that it applies again", f.Name)
		require.Len(t, f.Checksum(), 64)
	}
	require.Equal(t, []string{"append_events", "append_group", "delete_events_tagged", "events_append_only", "import_events", "rebase_transaction_ids"}, names)
	for _, shared := range []string{
		"v_any := p_item_idem[i] OR NOT v_cursor;",
		"RAISE EXCEPTION 'pgdcb: lock keys not strictly ascending at %'",
		"SET plan_cache_mode = force_generic_plan",
		"AS tag_end",
	} {
		require.Contains(t, byName["append_events"], shared)
		require.Contains(t, byName["append_group"], shared)
	}
	require.Contains(t, byName["append_events"], "WHERE (e.transaction_id, e.position) > (p_after_tx, p_after_pos)")
	require.Contains(t, byName["append_group"], "WHERE (e.transaction_id, e.position) > (v_atx, v_apos)")
	require.NotContains(t, byName["append_group"], "append_events(", "no nested call")
}

func checksumOf(t *testing.T, name string) string {
	t.Helper()
	for _, f := range pgdcbsql.Functions() {
		if f.Name == name {
			return f.Checksum()
		}
	}
	t.Fatalf("no function %s", name)
	return ""
}

// A server function is applied again when its text changes (a library whose
// function file changed), in one transaction with its checksum; until then
// CheckCurrent reports the schema as not migrated. Unchanged, nothing is
// applied again.
func TestFunctionsApplyAgainWhenTheirTextChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	_, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	q, err := pgdcbsql.Quote(schema)
	require.NoError(t, err)
	applied := func() map[string]string {
		rows, err := pool.Query(ctx, "SELECT name, checksum || ' ' || xmin::text FROM "+q+".schema_functions")
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var n, v string
			require.NoError(t, rows.Scan(&n, &v))
			out[n] = v
		}
		require.NoError(t, rows.Err())
		return out
	}
	first := applied()
	require.Len(t, first, len(pgdcbsql.Functions()))

	// The schema as an older library left it: another append_group.
	_, err = pool.Exec(ctx, `CREATE OR REPLACE FUNCTION `+q+`.append_group(
		p_types text[], p_tag_counts integer[], p_tags text[], p_data jsonb[], p_metadata jsonb[], p_event_ids uuid[],
		p_member_events integer[], p_lock_keys bigint[], p_lock_excl boolean[], p_item_idem boolean[],
		p_item_type_counts integer[], p_item_types text[], p_item_tag_counts integer[], p_item_tags text[],
		p_member_items integer[], p_after_tx xid8[], p_after_pos bigint[], p_after_snap text[],
		OUT statuses text[], OUT tx xid8, OUT positions bigint[], OUT conflicts bigint[])
		LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the old text'; END $$`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE "+q+".schema_functions SET checksum = 'old' WHERE name = 'append_group'")
	require.NoError(t, err)
	err = pgdcbsql.CheckCurrent(ctx, pool, schema)
	require.ErrorIs(t, err, pgdcb.ErrNotMigrated)
	require.ErrorContains(t, err, "append_group")

	done, err := pgdcbsql.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	require.Empty(t, done, "no step")
	require.NoError(t, pgdcbsql.CheckCurrent(ctx, pool, schema))
	second := applied()
	for name, v := range first {
		if name == "append_group" {
			require.NotEqual(t, v, second[name], "applied again")
			require.True(t, strings.HasPrefix(second[name], checksumOf(t, name)+" "))
		} else {
			require.Equal(t, v, second[name], "%s unchanged: not applied again", name)
		}
	}
	// The group committer's function is the library's again: a group append works.
	s, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "account=a1")})
	require.NoError(t, err)
}
