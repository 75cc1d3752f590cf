package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

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

	err = run(ctx, []string{"-dsn", dsn, "-schema", `bad"name`, "status"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorIs(t, err, pgdcb.ErrInvalidSchema)
}
