package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

// clearDSNEnv unsets every variable a DSN may come from, for the test.
func clearDSNEnv(t *testing.T) {
	t.Helper()
	for _, v := range append(append([]string{}, dsnVars...), libpqVars...) {
		t.Setenv(v, "")
	}
}

// The DSN comes from -dsn, else PGDCB_DATABASE_URL, else DATABASE_URL, else
// the libpq variables; each is shown to be used by pointing the others at a
// port nothing listens on.
func TestDSNFromEnvironment(t *testing.T) {
	dsn, schema := pgtest.DSN(t), pgtest.Schema(t)
	const dead = "postgres://postgres@127.0.0.1:1/none?connect_timeout=2"
	clearDSNEnv(t)
	r := cli(t, "", "-schema", schema, "migrate")
	require.Equal(t, 2, r.code, "no database: %s", r.stderr)

	t.Setenv("DATABASE_URL", dsn)
	r = cli(t, "", "-schema", schema, "migrate")
	require.Equal(t, 0, r.code, "DATABASE_URL: %s", r.stderr)

	t.Setenv("PGDCB_DATABASE_URL", dead)
	r = cli(t, "", "-schema", schema, "head")
	require.Equal(t, 1, r.code, "PGDCB_DATABASE_URL wins over DATABASE_URL: %s", r.stderr)
	r = cli(t, "", "-schema", schema, "-dsn", dsn, "head")
	require.Equal(t, 0, r.code, "-dsn wins over both: %s", r.stderr)

	// The libpq variables, from the test DSN's parts.
	clearDSNEnv(t)
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" || u.Host == "" {
		t.Skipf("the test DSN is not a URL with a host (%q): the libpq variables are checked with URL DSNs only", dsn)
	}
	t.Setenv("PGHOST", u.Hostname())
	if u.Port() != "" {
		t.Setenv("PGPORT", u.Port())
	}
	t.Setenv("PGDATABASE", strings.TrimPrefix(u.Path, "/"))
	t.Setenv("PGUSER", u.User.Username())
	if pw, ok := u.User.Password(); ok {
		t.Setenv("PGPASSWORD", pw)
	}
	if m := u.Query().Get("sslmode"); m != "" {
		t.Setenv("PGSSLMODE", m)
	}
	r = cli(t, "", "-schema", schema, "head")
	require.Equal(t, 0, r.code, "PG* variables: %s", r.stderr)
	// They fill in what a URL leaves out: a URL without a port takes PGPORT.
	t.Setenv("PGPORT", "1")
	r = cli(t, "", "-schema", schema, "head")
	require.Equal(t, 1, r.code, "PGPORT=1 is used: %s", r.stderr)
	r = cli(t, "", "-schema", schema, "-dsn", dsn, "head")
	if u.Port() != "" {
		require.Equal(t, 0, r.code, "the URL's own port wins over PGPORT: %s", r.stderr)
	}
}

// Under -json, errors (usage or not) and the final cursor are JSON objects
// on stderr.
func TestJSONErrorsAndCursor(t *testing.T) {
	clearDSNEnv(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-json", "frob"}, 2, `unknown command "frob"`},
		{[]string{"-json", "head", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"head", "-json"}, 2, "no database"},
		{[]string{"-json", "-dsn", "not a url", "head"}, 2, "invalid -dsn"},
		{[]string{"-json", "-dsn", "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", "head"}, 1, "head: connect: "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cli(t, "", tc.args...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Len(t, lines(r.stderr), 1, "one JSON line: %s", r.stderr)
			m := decode(t, r.stderr)
			require.Contains(t, m["error"], tc.want)
			require.EqualValues(t, tc.code, m["exit_code"])
		})
	}
	sh, _ := db(t)
	require.Equal(t, 0, sh("", "migrate").code)
	require.Equal(t, 0, sh("", "append", "-type", "A").code)
	r := sh("", "read", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, lines(r.stdout), 1)
	require.NotEmpty(t, decode(t, r.stderr)["cursor"], "the cursor is a JSON object: %s", r.stderr)
	r = sh("", "read")
	require.True(t, strings.HasPrefix(r.stderr, "cursor "), r.stderr)
}
