package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
)

// pgdcb erase destroys the subject's key: the library then reads null in
// place of the sealed field; export never shows the plaintext (the CLI
// has no KEK), before or after; a missing or invalid -subject is a usage
// error (exit 2).
func TestCLIErase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh, schema := db(t)
	require.Equal(t, exitOK, sh("", "migrate").code)
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	kek, err := eventstore.NewAESKeyWrapper(make([]byte, 32))
	require.NoError(t, err)
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema, KEK: kek})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close(ctx) })
	const marker = "Ada-Lovelace-cli"
	_, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened",
		map[string]any{"owner": pgdcb.Personal("u1", marker), "other": pgdcb.Personal("u2", "Bob")}, "wallet=w1")})
	require.NoError(t, err)

	r := sh("", "export")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "pgdcb.sealed")
	require.NotContains(t, r.stdout, marker)

	require.Equal(t, exitUsage, sh("", "erase").code)
	require.Equal(t, exitUsage, sh("", "erase", "-subject", "a\x00b").code)
	r = sh("", "erase", "-subject", "u1", "-json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "u1", decode(t, r.stdout)["subject"])

	evs, _, err := store.ReadAll(ctx, query.Tagged([]string{"Opened"}), nil)
	require.NoError(t, err)
	require.Equal(t, `{"other": "Bob", "owner": null}`, string(evs[0].Data))
	r = sh("", "export")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, pgdcb.ErasedEventType)
	require.NotContains(t, r.stdout, marker)
}
