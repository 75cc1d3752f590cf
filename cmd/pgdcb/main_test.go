package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/pgtest"
)

func TestCLI(t *testing.T) {
	ctx := context.Background()
	dsn, schema := pgtest.DSN(t), pgtest.Schema(t)
	sh := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"-dsn", dsn, "-schema", schema}, args...), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	_, _, err := sh("head")
	require.ErrorIs(t, err, pgdcb.ErrNotMigrated)
	out, _, err := sh("status")
	require.NoError(t, err)
	require.Contains(t, out, "pending")
	out, _, err = sh("migrate")
	require.NoError(t, err)
	require.Contains(t, out, "applied")
	out, _, err = sh("status")
	require.NoError(t, err)
	require.NotContains(t, out, "pending")
	require.Contains(t, out, "transaction ids: below the server's counter")

	out, _, err = sh("append", "-type", "Opened", "-tag", "account=1", "-data", `{"owner":"ann"}`)
	require.NoError(t, err)
	require.Contains(t, out, "appended at position")
	_, _, err = sh("append", "-type", "Opened", "-tag", "Bad Tag", "-data", `{}`)
	require.ErrorIs(t, err, pgdcb.ErrInvalidTag)
	_, _, err = sh("append", "-type", "Opened", "-data", `{nope`)
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)

	out, errOut, err := sh("read", "-tag", "account=1")
	require.NoError(t, err)
	var ev map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &ev))
	require.Equal(t, "Opened", ev["type"])
	require.Contains(t, errOut, "cursor ")
	cur := strings.TrimSpace(strings.TrimPrefix(errOut, "cursor "))
	out, _, err = sh("read", "-tag", "account=1", "-after", cur)
	require.NoError(t, err)
	require.Empty(t, out)
	_, _, err = sh("read", "-after", "garbage!")
	require.ErrorIs(t, err, pgdcb.ErrInvalidCursor)
	out, _, err = sh("head")
	require.NoError(t, err)
	require.Contains(t, out, "position=1")

	// A restored log: status tells, the other commands refuse, rebase-xids mends.
	pool := pgtest.Pool(t)
	_, err = pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema}.Sanitize()+`.events (transaction_id, type, tags, data)
		VALUES ((pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)::text::xid8, 'Restored', '{}', '{}')`)
	require.NoError(t, err)
	out, _, err = sh("status")
	require.NoError(t, err)
	require.Contains(t, out, "rebase-xids")
	_, _, err = sh("head")
	require.ErrorIs(t, err, pgdcb.ErrTransactionIDsAhead)
	out, _, err = sh("rebase-xids")
	require.NoError(t, err)
	require.Contains(t, out, "2 transaction ids rebased")
	_, _, err = sh("head")
	require.NoError(t, err)

	err = run(ctx, []string{"-dsn", dsn, "-schema", `bad"name`, "status"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorIs(t, err, pgdcb.ErrInvalidSchema)
}
