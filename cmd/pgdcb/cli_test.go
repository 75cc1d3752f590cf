package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/syncbuf"
	"github.com/pgdcb/pgdcb/internal/version"
	"github.com/pgdcb/pgdcb/projection"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command line as the binary would, with stdin.
func cli(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// db returns a function running commands against a fresh schema.
func db(t *testing.T) (func(stdin string, args ...string) result, string) {
	dsn, schema := pgtest.DSN(t), pgtest.Schema(t)
	return func(stdin string, args ...string) result {
		t.Helper()
		return cli(t, stdin, append([]string{"-dsn", dsn, "-schema", schema}, args...)...)
	}, schema
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), s)
	return m
}

func lines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestHelpWithoutDatabase: help, usage and unknown commands need no database;
// help exits 0, usage errors 2.
func TestHelpWithoutDatabase(t *testing.T) {
	clearDSNEnv(t)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"-json", "-h"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cli(t, "", args...)
			require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
			for _, c := range commands {
				require.Contains(t, r.stdout, "\n  "+c.name+" ", args)
			}
			require.Contains(t, r.stdout, "Exit codes:")
			require.Empty(t, r.stderr)
		})
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				r := cli(t, "", args...)
				require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
				require.Contains(t, r.stdout, "Usage: pgdcb [global flags] "+c.name)
				require.Contains(t, r.stdout, "-dsn", "global flags are listed")
			})
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "pgdcb: no command given"},
		{[]string{"frob"}, `pgdcb: unknown command "frob"`},
		{[]string{"help", "frob"}, `pgdcb: help: unknown command "frob"`},
		{[]string{"-bogus", "head"}, "pgdcb: flag provided but not defined: -bogus"},
		{[]string{"head", "-bogus"}, "pgdcb: head: flag provided but not defined: -bogus"},
		{[]string{"read"}, "pgdcb: read: no database: pass -dsn URL, or set PGDCB_DATABASE_URL, DATABASE_URL or the PG* variables"},
		{[]string{"-dsn", "not a url", "head"}, "pgdcb: head: invalid -dsn: "},
		{[]string{"head", "-dsn", "postgres://x:99999999/db"}, "pgdcb: head: invalid -dsn: "},
		{[]string{"migrate", "extra"}, `pgdcb: migrate: unexpected arguments ["extra"]`},
		{[]string{"append", "-type", "X", "extra"}, `pgdcb: append: unexpected arguments ["extra"]`},
		{[]string{"-dsn", "postgres://x", "-schema", `bad"name`, "status"}, "pgdcb: status: invalid schema name"},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			r := cli(t, "", tc.args...)
			require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
			require.True(t, strings.HasPrefix(r.stderr, tc.want), "%v: %s", tc.args, r.stderr)
			require.NotContains(t, r.stderr, "pgdcb: pgdcb:")
		})
	}
}

func TestVersion(t *testing.T) {
	t.Setenv("PGDCB_DATABASE_URL", "")
	r := cli(t, "", "version")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("schema version %d", pgdcbsql.LatestVersion()))
	r = cli(t, "", "version", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	m := decode(t, r.stdout)
	require.Equal(t, modulePath, m["module"])
	require.Equal(t, version.Release, m["version"])
	require.EqualValues(t, pgdcbsql.LatestVersion(), m["schema_version"])
}

// TestOperationErrors: one prefix, the failed operation named, exit 1.
func TestOperationErrors(t *testing.T) {
	t.Parallel()
	r := cli(t, "", "-dsn", "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", "head")
	require.Equal(t, 1, r.code)
	require.True(t, strings.HasPrefix(r.stderr, "pgdcb: head: connect: "), r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "dial tcp 127.0.0.1:1"), "the dial error once: %s", r.stderr)

	sh, _ := db(t)
	r = sh("", "head")
	require.Equal(t, 3, r.code, "not migrated: %s", r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "pgdcb: head: check schema: schema not migrated"), r.stderr)
	require.Equal(t, 0, sh("", "migrate").code)
	r = sh("", "append", "-type", "Opened", "-tag", "Bad Tag")
	require.Equal(t, 2, r.code)
	require.True(t, strings.HasPrefix(r.stderr, "pgdcb: append: invalid tag"), r.stderr)
	require.NotContains(t, r.stderr, "pgdcb: pgdcb:")
}

// TestGlobalFlagsAfterCommand: `migrate -dsn URL` uses that URL, not the
// environment's.
func TestGlobalFlagsAfterCommand(t *testing.T) {
	t.Setenv("PGDCB_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?connect_timeout=2")
	dsn, schema := pgtest.DSN(t), pgtest.Schema(t)
	r := cli(t, "", "migrate", "-dsn", dsn, "-schema", schema, "-json")
	require.Equal(t, 0, r.code, r.stderr)
	m := decode(t, r.stdout)
	require.Equal(t, schema, m["schema"])
	require.NotEmpty(t, m["applied"])
	r = cli(t, "", "migrate", "-dsn", dsn, "-schema", schema, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []any{}, decode(t, r.stdout)["applied"])
}

func TestStatusExitCodesAndJSON(t *testing.T) {
	t.Parallel()
	sh, schema := db(t)
	r := sh("", "status", "-json")
	require.Equal(t, 3, r.code, r.stderr)
	m := decode(t, r.stdout)
	require.Equal(t, true, m["needs_attention"])
	require.Equal(t, false, m["current"])
	require.Len(t, m["pending"], len(pgdcbsql.Migrations()))
	require.NotEmpty(t, m["schema_error"])
	e := decode(t, r.stderr) // under -json the error is an object too
	require.Contains(t, e["error"], "status: the schema needs attention: ")
	require.Contains(t, e["error"], "migration(s) pending")
	require.EqualValues(t, 3, e["exit_code"])

	require.Equal(t, 0, sh("", "migrate").code)
	r = sh("", "status", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	m = decode(t, r.stdout)
	require.Equal(t, false, m["needs_attention"])
	require.Equal(t, true, m["current"])
	require.Equal(t, []any{}, m["pending"])
	require.Equal(t, map[string]any{"ok": true}, m["transaction_ids"])
	mig := m["migrations"].([]any)[0].(map[string]any)
	require.Equal(t, true, mig["applied"])
	require.EqualValues(t, 1, mig["version"])

	// rebase-xids refuses a healthy log, unless -force.
	r = sh("", "rebase-xids")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "pgdcb: rebase-xids: refused: the log's transaction ids are below the server's counter")
	require.Contains(t, r.stderr, "-force")
	r = sh("", "rebase-xids", "-force", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "invalid", "it says what it invalidates")
	require.Contains(t, decode(t, r.stdout), "ids")

	// A restored log: status exits 3, rebase-xids runs without -force.
	pool := pgtest.Pool(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO `+pgx.Identifier{schema}.Sanitize()+`.events (transaction_id, type, tags, data)
		VALUES ((pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000)::text::xid8, 'Restored', '{}', '{}')`)
	require.NoError(t, err)
	r = sh("", "status", "-json")
	require.Equal(t, 3, r.code)
	tx := decode(t, r.stdout)["transaction_ids"].(map[string]any)
	require.Equal(t, false, tx["ok"])
	require.Contains(t, tx["error"], "rebase-xids")
	r = sh("", "rebase-xids")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 transaction ids rebased")
	require.Equal(t, 0, sh("", "status").code)
}

func TestHeadAppendJSON(t *testing.T) {
	t.Parallel()
	sh, _ := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	r := sh("", "head", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	require.EqualValues(t, 0, decode(t, r.stdout)["position"])

	r = sh("", "append", "-json", "-type", "Opened", "-tag", "account=1", "-data", `{"owner":"ann"}`, "-metadata", `{"by":"cli"}`)
	require.Equal(t, 0, r.code, r.stderr)
	a := decode(t, r.stdout)
	require.Equal(t, []any{float64(1)}, a["positions"])
	require.NotZero(t, a["transaction_id"])

	r = sh("", "head", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	h := decode(t, r.stdout)
	require.Equal(t, a["transaction_id"], h["transaction_id"])
	require.EqualValues(t, 1, h["position"])
	require.NotEmpty(t, h["cursor"])

	r = sh("", "read", "-query", "Opened:account=1")
	require.Equal(t, 0, r.code, r.stderr)
	ev := decode(t, r.stdout)
	require.Equal(t, map[string]any{"by": "cli"}, ev["metadata"])
	require.Equal(t, []any{"account=1"}, ev["tags"])

	require.Equal(t, 2, sh("", "append").code, "-type or -stdin required")
	require.Equal(t, 2, sh("", "append", "-type", "X", "-after", h["cursor"].(string)).code, "-after needs -if-none")
	require.Equal(t, 2, sh("", "append", "-type", "X", "-data", "{nope").code)
	r = sh("", "read")
	require.Len(t, lines(r.stdout), 1, "nothing appended by refused commands")
}

func TestAppendStdinConditions(t *testing.T) {
	t.Parallel()
	sh, _ := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	in := `{"type":"Opened","tags":["account=1"],"data":{"n":1},"id":"0190f5b2-0000-7000-8000-000000000001"}

{"type":"Deposited","tags":["account=1"],"data":{"n":2},"metadata":{"m":1}}
`
	r := sh(in, "append", "-stdin", "-json", "-if-none", "Opened:account=1", "-idempotency", `[{"types":["Opened"],"tags":["account=1"]}]`)
	require.Equal(t, 0, r.code, r.stderr)
	first := decode(t, r.stdout)
	require.Equal(t, []any{float64(1), float64(2)}, first["positions"])
	cur := first["cursor"].(string)

	// The same again: already applied (exit 5).
	r = sh(in, "append", "-stdin", "-idempotency", "Opened:account=1")
	require.Equal(t, 5, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "pgdcb: append: operation already applied"), r.stderr)

	// A decision at cur still holds; another event makes it stale (exit 4).
	r = sh("", "append", "-type", "Withdrawn", "-tag", "account=1", "-if-none", ":account=1", "-after", cur)
	require.Equal(t, 0, r.code, r.stderr)
	r = sh("", "append", "-type", "Withdrawn", "-tag", "account=1", "-if-none", ":account=1", "-after", cur)
	require.Equal(t, 4, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "pgdcb: append: append condition failed"), r.stderr)

	// A duplicate event id: exit 5.
	r = sh(`{"type":"Opened","data":{},"id":"0190f5b2-0000-7000-8000-000000000001"}`, "append", "-stdin")
	require.Equal(t, 5, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "pgdcb: append: operation already applied: event id"), "the op once: %s", r.stderr)

	for _, bad := range []string{"", "{nope", `{"type":"X","tags":["Bad Tag"]}`, `{"type":"X","id":"nope"}`} {
		t.Run(fmt.Sprintf("stdin %q", bad), func(t *testing.T) {
			r := sh(bad, "append", "-stdin")
			require.Equal(t, 2, r.code, "%q: %s", bad, r.stderr)
		})
	}
	r = sh("", "append", "-type", "X", "-if-none", "Bad Tag:")
	require.Equal(t, 0, r.code, "'Bad Tag' is a type here: %s", r.stderr)
	r = sh("", "append", "-type", "X", "-if-none", ":Bad Tag")
	require.Equal(t, 2, r.code, r.stderr)
	r = sh("", "append", "-type", "X", "-if-none", "[{")
	require.Equal(t, 2, r.code, r.stderr)

	r = sh("", "read")
	require.Len(t, lines(r.stdout), 4)
}

func TestExportImport(t *testing.T) {
	t.Parallel()
	src, _ := db(t)
	dst, _ := db(t)
	require.Equal(t, 0, src("", "migrate").code)
	require.Equal(t, 0, dst("", "migrate").code)
	var in strings.Builder
	for i := range 25 {
		id := ""
		if i%2 == 0 {
			id = fmt.Sprintf(`,"id":"0190f5b2-0000-7000-8000-%012d"`, i)
		}
		fmt.Fprintf(&in, `{"type":"T%d","tags":["k=%d","all=yes"],"data":{"i":%d},"metadata":{"m":%d}%s}`+"\n", i%3, i, i, i, id)
	}
	require.Equal(t, 0, src(in.String(), "append", "-stdin").code)
	require.Equal(t, 0, src("", "append", "-type", "Later").code)

	r := src("", "export", "-query", ":all=yes", "-batch", "7", "-progress", "10")
	require.Equal(t, 0, r.code, r.stderr)
	exported := r.stdout
	require.Len(t, lines(exported), 25)
	require.Contains(t, r.stderr, "pgdcb: export: 10 events")
	require.Contains(t, r.stderr, "pgdcb: export: 25 events; cursor ")

	// Continuing from the cursor gives the rest only.
	r = src("", "export", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	all := lines(r.stdout)
	require.Len(t, all, 26)
	cur := decode(t, lines(r.stderr)[len(lines(r.stderr))-1])["cursor"].(string)
	require.Empty(t, src("", "export", "-after", cur).stdout)

	// The 25 events were appended in one transaction: one transaction, in
	// calls of 4 events.
	r = dst(exported, "import", "-batch", "4", "-progress", "10", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	m := decode(t, r.stdout)
	require.EqualValues(t, 25, m["imported"])
	require.EqualValues(t, 1, m["transactions"])
	require.Contains(t, lines(r.stderr), `{"elapsed":`+fmt.Sprintf("%q", decode(t, lines(r.stderr)[0])["elapsed"])+`,"events":25,"progress":"import"}`)

	strip := func(s string) []map[string]any {
		var out []map[string]any
		for _, l := range lines(s) {
			e := decode(t, l)
			delete(e, "position")
			delete(e, "transaction_id")
			out = append(out, e)
		}
		return out
	}
	r = dst("", "read")
	require.Equal(t, strip(exported), strip(r.stdout), "type, tags, data, metadata, id, recorded time and order kept")
	require.Equal(t, "0190f5b2-0000-7000-8000-000000000000", decode(t, lines(r.stdout)[0])["id"])

	r = dst(exported, "import")
	require.Equal(t, 6, r.code, "a precondition failed: %s", r.stderr)
	require.Contains(t, r.stderr, "pgdcb: import: refused: the log is not empty")
	r = dst(exported, "import", "-json")
	require.Equal(t, 6, r.code)
	require.EqualValues(t, 6, decode(t, r.stderr)["exit_code"])
	r = dst(exported, "import", "-force")
	require.Equal(t, 5, r.code, "stored ids: %s", r.stderr)
	require.Contains(t, r.stderr, "after 0 events imported")
	require.Len(t, lines(dst("", "read").stdout), 25)
}

// withParam returns dsn with a connection parameter added.
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

func TestTail(t *testing.T) {
	t.Parallel()
	sh, schema := db(t)
	var rb [4]byte
	_, err := rand.Read(rb[:])
	require.NoError(t, err)
	app := "pgdcb_tail_test_" + hex.EncodeToString(rb[:])
	dsn := withParam(t, pgtest.DSN(t), "application_name", app)
	require.Equal(t, 0, sh("", "migrate").code)
	require.Equal(t, 0, sh("", "append", "-type", "A", "-tag", "k=1").code)
	require.Equal(t, 0, sh("", "append", "-type", "B", "-tag", "k=1").code)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-dsn", dsn, "-schema", schema, "tail", "-query", "A", "-poll", "50ms"}, strings.NewReader(""), &out, &errOut)
	}()
	require.Eventually(t, func() bool { return len(lines(out.String())) == 1 }, time.Minute, 20*time.Millisecond) // a tailing read: any open transaction on the shared server delays it

	// The server drops tail's connections: it reconnects by itself.
	var killed int
	require.NoError(t, pgtest.Pool(t).QueryRow(context.Background(),
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&killed))
	require.NotZero(t, killed)
	require.Equal(t, 0, sh("", "append", "-type", "A", "-tag", "k=2").code)
	require.Equal(t, 0, sh("", "append", "-type", "B", "-tag", "k=2").code)
	require.Eventually(t, func() bool { return len(lines(out.String())) == 2 }, time.Minute, 20*time.Millisecond)
	require.Equal(t, []any{"k=2"}, decode(t, lines(out.String())[1])["tags"])
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("tail did not stop on cancel")
	}
	// The last line is the cursor (warnings of the reconnection come before).
	errLines := lines(errOut.String())
	last := errLines[len(errLines)-1]
	require.True(t, strings.HasPrefix(last, "cursor "), errOut.String())
	cur := strings.TrimSpace(strings.TrimPrefix(last, "cursor "))
	r := sh("", "read", "-query", "A", "-after", cur)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout, "the tail's cursor covers every A it printed")

	require.Equal(t, 2, sh("", "tail", "-poll", "0s").code)
	require.Equal(t, 2, sh("", "tail", "-after", "garbage!").code)
}

func TestProjections(t *testing.T) {
	t.Parallel()
	sh, schema := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	r := sh("", "projections", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, []any{}, decode(t, r.stdout)["projections"])

	ctx := context.Background()
	store, err := eventstore.New(pgtest.Pool(t), &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, projection.Pause(ctx, store, "balances")) // creates the checkpoint
	require.Equal(t, 0, sh("", "append", "-type", "A").code)
	require.Equal(t, 0, sh("", "append", "-type", "A").code)

	r = sh("", "projections")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "LAST ERROR")
	require.Regexp(t, `balances\s+PAUSED\s+2\s+0`, r.stdout)

	r = sh("", "projections", "list", "-json")
	require.Equal(t, 0, r.code, "flags may follow arguments: %s", r.stderr)
	require.Equal(t, "balances", decode(t, r.stdout)["projections"].([]any)[0].(map[string]any)["name"])
	r = sh("", "projections", "-json", "list")
	require.Equal(t, 0, r.code, r.stderr)
	p := decode(t, r.stdout)["projections"].([]any)[0].(map[string]any)
	require.Equal(t, "balances", p["name"])
	require.Equal(t, "PAUSED", p["state"])
	require.EqualValues(t, 2, p["lag"])
	for _, k := range []string{"cursor", "error_count", "last_error", "leader", "heartbeat_at", "updated_at"} {
		require.Contains(t, p, k)
	}

	r = sh("", "projections", "-json", "resume", "balances")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "ACTIVE", decode(t, r.stdout)["state"])
	r = sh("", "projections", "pause", "balances")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "now PAUSED")
	st, err := projection.GetStatus(ctx, store, "balances")
	require.NoError(t, err)
	require.Equal(t, projection.Paused, st.State)

	// A reset that cannot clear the read model (the wallet's balances
	// doubled: balances registered no tables) is refused unless
	// -checkpoint-only names the risk; -force is refused; the checkpoint
	// stays where it was.
	for _, tc := range []struct {
		args []string
		code int
		why  string
	}{
		{[]string{"projections", "reset", "balances"}, 6, "registered no read model tables"},
		{[]string{"projections", "reset", "-force", "balances"}, 2, "-force no longer resets"},
		{[]string{"projections", "-force", "reset", "balances"}, 2, "-force no longer resets"},
	} {
		r = sh("", tc.args...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.why)
		require.Contains(t, r.stderr, "-checkpoint-only")
		st, err := projection.GetStatus(ctx, store, "balances")
		require.NoError(t, err)
		require.Equal(t, projection.Paused, st.State, "%v: not reset", tc.args)
	}
	r = cli(t, "", "projections", "reset", "-h")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "the read model is NOT cleared")
	for _, args := range [][]string{
		{"projections", "-checkpoint-only", "reset", "balances"},
		{"projections", "reset", "-checkpoint-only", "balances"}, // the usage line's form
		{"projections", "reset", "balances", "-checkpoint-only"},
	} {
		require.NoError(t, projection.Pause(ctx, store, "balances"))
		r = sh("", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stdout, "checkpoint only: the read model was NOT cleared")
		require.Contains(t, r.stdout, "now ACTIVE")
	}
	r = sh("", "projections", "pause", "--", "-force")
	require.Equal(t, 1, r.code, "after -- a flag is an argument: %s", r.stderr)
	require.Contains(t, r.stderr, "no such checkpoint")

	r = sh("", "projections", "pause", "nosuch")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "pgdcb: projections: projection: no such checkpoint")
	require.Equal(t, 2, sh("", "projections", "frob").code)
	require.Equal(t, 2, sh("", "projections", "pause").code)
	require.Equal(t, 2, sh("", "projections", "pause", "a", "b").code)
}

// TestTailStopsOnSIGINT runs main in a child process and interrupts it: tail
// stops, prints its cursor and exits 0.
func TestTailStopsOnSIGINT(t *testing.T) {
	if os.Getenv(cliMainEnv) != "" {
		os.Args = append([]string{"pgdcb"}, strings.Split(os.Getenv(cliArgsEnv), "\x1f")...)
		main()
		os.Exit(0)
	}
	t.Parallel()
	sh, schema := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	require.Equal(t, 0, sh("", "append", "-type", "A").code)
	cmd := exec.Command(os.Args[0], "-test.run=^TestTailStopsOnSIGINT$")
	cmd.Env = append(os.Environ(), cliMainEnv+"=1",
		cliArgsEnv+"="+strings.Join([]string{"-dsn", pgtest.DSN(t), "-schema", schema, "tail", "-poll", "50ms"}, "\x1f"))
	var out, errOut syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return strings.Contains(out.String(), `"type":"A"`) }, time.Minute, 20*time.Millisecond, errOut.String())
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait(), errOut.String())
	require.Equal(t, 0, cmd.ProcessState.ExitCode())
	require.True(t, strings.HasPrefix(errOut.String(), "cursor "), errOut.String())
}

// sql prints the migrations without a database; -after limits them.
func TestSQLPrintsMigrations(t *testing.T) {
	t.Parallel()
	r := cli(t, "", "-schema", "demo", "sql", "-after", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `CREATE SCHEMA IF NOT EXISTS "demo"`)
	require.Contains(t, r.stdout, "step 002_")
	require.NotContains(t, r.stdout, "step 001_")
	require.Contains(t, r.stdout, "-- function append_events")
	require.NotContains(t, r.stdout, "runstore_migrations")
	r = cli(t, "", "-schema", "demo", "sql", "-runstore")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"demo".runstore_migrations`)
	require.Contains(t, r.stdout, "step 001_runstore")
	r = cli(t, "", "sql", "-after", "-1")
	require.Equal(t, 2, r.code)
}

// TestEmptyQueryItemsRefused: an empty item in a query (a stray ';', a lone
// ':') would match every event; every flag that takes a query refuses it,
// naming the flag, with exit 2, and nothing is read, appended or exported.
func TestEmptyQueryItemsRefused(t *testing.T) {
	t.Parallel()
	sh, _ := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	require.Equal(t, 0, sh("", "append", "-type", "A", "-tag", "b=c").code)
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"-query", []string{"read", "-query", "A:b=c;"}},
		{"-query", []string{"read", "-query", ";"}},
		{"-query", []string{"read", "-query", ":"}},
		{"-query", []string{"read", "-query", `[{"types":["A"]},{}]`}},
		{"-if-none", []string{"append", "-type", "X", "-if-none", "B;"}},
		{"-idempotency", []string{"append", "-type", "X", "-idempotency", ":"}},
		{"-query", []string{"export", "-query", "A;"}},
		{"-query", []string{"export", "-query", ""}},
		{"-query", []string{"tail", "-query", ";A"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := sh("", tc.args...)
			require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stdout+r.stderr)
			require.Empty(t, r.stdout)
			require.Contains(t, r.stderr, tc.flag+": invalid query: item ")
			require.Contains(t, r.stderr, "is empty")
		})
	}
	require.Len(t, lines(sh("", "read").stdout), 1, "nothing appended")
	r := sh("", "read", "-query", "A:b=c")
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, lines(r.stdout), 1)
}
