package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

func TestCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.DSN(t), pgtest.Schema(t)
	sh := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := execute(ctx, append([]string{"-dsn", dsn, "-schema", schema}, args...), nil, &out, &errOut)
		return out.String(), errOut.String(), err
	}
	_, _, err := sh("head")
	require.ErrorIs(t, err, pgdcb.ErrNotMigrated)
	out, _, err := sh("status")
	require.ErrorIs(t, err, errSchemaAttention, "migrations pending")
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
	require.ErrorIs(t, err, errSchemaAttention)
	require.Contains(t, out, "rebase-xids")
	_, _, err = sh("head")
	require.ErrorIs(t, err, pgdcb.ErrTransactionIDsAhead)
	out, _, err = sh("rebase-xids")
	require.NoError(t, err)
	require.Contains(t, out, "2 transaction ids rebased")
	_, _, err = sh("head")
	require.NoError(t, err)

	err = execute(ctx, []string{"-dsn", dsn, "-schema", `bad"name`, "status"}, nil, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorIs(t, err, pgdcb.ErrInvalidSchema)
}

// withUser returns dsn connecting as user instead (the test server trusts
// local connections).
func withUser(t *testing.T, dsn, user string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		u.User = url.User(user)
		return u.String()
	}
	return dsn + " user=" + user
}

// TestCLIGrant: the owner migrates and grants an application role, which can
// then append and read but not delete.
func TestCLIGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.DSN(t), pgtest.Schema(t)
	sh := func(dsn string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := execute(ctx, append([]string{"-dsn", dsn, "-schema", schema}, args...), nil, &out, &errOut)
		return out.String(), err
	}
	pool := pgtest.Pool(t)
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	app := "pgdcb_test_cli_" + hex.EncodeToString(b[:])
	_, err = pool.Exec(ctx, "CREATE ROLE "+app+" LOGIN")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", app)
		_, err := pool.Exec(context.Background(), "DROP OWNED BY "+app)
		require.NoError(t, err)
		_, err = pool.Exec(context.Background(), "DROP ROLE "+app)
		require.NoError(t, err)
	})

	_, err = sh(dsn, "grant", "-role", app)
	require.ErrorIs(t, err, pgdcb.ErrNotMigrated)
	_, err = sh(dsn, "migrate")
	require.NoError(t, err)
	_, err = sh(dsn, "grant")
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.ErrorContains(t, err, "-role", "the error names the flag")
	r := cli(t, "", "-dsn", dsn, "-schema", schema, "grant")
	require.Equal(t, 2, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "pgdcb: grant: invalid argument -role: is required"), r.stderr)
	_, err = sh(dsn, "grant", "--role", "pgdcb_test_no_such_role")
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	out, err := sh(dsn, "grant", "--role", app)
	require.NoError(t, err)
	require.Contains(t, out, "role "+app+" may read, append")
	out, err = sh(dsn, "grant", "-json", "--role", app)
	require.NoError(t, err)
	var granted map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &granted))
	require.Equal(t, map[string]any{"schema": schema, "role": app, "granted": true}, granted)

	appDSN := withUser(t, dsn, app)
	out, err = sh(appDSN, "append", "-type", "Opened", "-tag", "account=1")
	require.NoError(t, err)
	require.Contains(t, out, "appended at position 1")
	out, err = sh(appDSN, "read", "-tag", "account=1")
	require.NoError(t, err)
	require.Contains(t, out, `"type":"Opened"`)
	_, err = sh(appDSN, "grant", "--role", app)
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, "only the owner grants")
	require.ErrorContains(t, err, "not the owner")
}
