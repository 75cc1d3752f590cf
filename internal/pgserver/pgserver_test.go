package pgserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// anyServer finds a server the default way, once, for the tests that need
// one to point options at.
var anyServer = sync.OnceValues(func() (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return Find(ctx, Options{})
})

func TestMain(m *testing.M) {
	code := m.Run()
	if s, err := anyServer(); err == nil {
		_ = s.Close()
	}
	os.Exit(code)
}

func someDSN(t *testing.T) string {
	t.Helper()
	s, err := anyServer()
	require.NoError(t, err)
	return s.DSN()
}

func queryInt(t *testing.T, dsn, sql string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&n))
	return n
}

func TestFindHonoursURL(t *testing.T) {
	dsn := someDSN(t)
	s, err := Find(t.Context(), Options{URL: dsn, NoLocal: true, NoThrowaway: true, NoDocker: true})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, dsn, s.DSN())
	require.Equal(t, SourceURL, s.Source())
	require.Equal(t, 1, queryInt(t, s.DSN(), "SELECT 1"))
}

func TestFindURLThatDoesNotAnswerIsAnError(t *testing.T) {
	// An explicit URL never falls back to another source.
	_, err := Find(t.Context(), Options{URL: "postgres://postgres:secret@127.0.0.1:1/x?sslmode=disable"})
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrNoServer)
	require.Contains(t, err.Error(), "Options.URL")
	require.Contains(t, err.Error(), "127.0.0.1:1")
	require.NotContains(t, err.Error(), "secret")
}

func TestFindHonoursEnvVar(t *testing.T) {
	dsn := someDSN(t)
	const name = "PGDCB_PGSERVER_TEST_URL"
	t.Setenv(name, dsn)
	s, err := Find(t.Context(), Options{EnvVar: name, NoLocal: true, NoThrowaway: true, NoDocker: true})
	require.NoError(t, err)
	require.Equal(t, SourceEnv, s.Source())
	require.Equal(t, dsn, s.DSN())
}

func TestFindLocalAfterPreferredSourcesFail(t *testing.T) {
	dsn := someDSN(t)
	s, err := Find(t.Context(), Options{
		NoEnv: true, PreferThrowaway: true, NoThrowaway: true, NoDocker: true,
		LocalDSNs: []string{"postgres://postgres@127.0.0.1:1/postgres?sslmode=disable", dsn},
	})
	require.NoError(t, err)
	require.Equal(t, SourceLocal, s.Source())
	require.Equal(t, dsn, s.DSN())
}

func TestErrorNamesDisabledSources(t *testing.T) {
	t.Parallel()
	_, err := Find(t.Context(), Options{NoEnv: true, NoLocal: true, NoThrowaway: true, NoDocker: true})
	require.ErrorIs(t, err, ErrNoServer)
	msg := err.Error()
	for _, want := range []string{
		"PGDCB_TEST_DATABASE_URL not consulted (disabled)",
		"local server not probed (disabled)",
		"throwaway cluster not tried (disabled)",
		"Docker not tried (disabled)",
	} {
		require.Contains(t, msg, want)
	}
}

func TestErrorNamesWhatIsMissing(t *testing.T) {
	empty := t.TempDir()
	var buf strings.Builder
	_, err := Find(t.Context(), Options{
		EnvVar:     "PGDCB_PGSERVER_TEST_UNSET",
		LocalDSNs:  []string{"postgres://postgres@127.0.0.1:1/postgres?sslmode=disable"},
		BinDirs:    []string{empty},
		DockerHost: "unix://" + filepath.Join(empty, "docker.sock"),
		Logger:     slog.New(slog.NewTextHandler(&buf, nil)),
	})
	require.ErrorIs(t, err, ErrNoServer)
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{
		"no PGDCB_PGSERVER_TEST_UNSET set",
		"nothing answering at 127.0.0.1:1",
		"no initdb found in " + empty,
		"no Docker engine at unix://" + empty,
	} {
		require.Contains(t, msg, want)
	}
	// One log line per decision when a logger is set.
	require.Equal(t, 4, strings.Count(buf.String(), "pgserver:"), buf.String())
}

func requireBinaries(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("throwaway clusters are Unix-only")
	}
	bins, notes := findBins(t.Context(), &Options{})
	if len(bins) == 0 {
		// Nothing to test here: the feature needs local PostgreSQL binaries.
		t.Skipf("no initdb in %s %v", defaultBinPlaces, notes)
	}
}

func TestThrowawayClusterStartsAndIsRemoved(t *testing.T) {
	requireBinaries(t)
	s, err := Find(t.Context(), Options{NoEnv: true, NoLocal: true, NoDocker: true})
	require.NoError(t, err)
	require.Equal(t, SourceThrowaway, s.Source())
	require.DirExists(t, s.dir)
	t.Log(s.DSN(), s.dir)

	require.Equal(t, 1, queryInt(t, s.DSN(), "SELECT 1"))
	require.Equal(t, 100, queryInt(t, s.DSN(), "SELECT current_setting('max_connections')::int"))
	require.Equal(t, 0, queryInt(t, s.DSN(), "SELECT (current_setting('fsync') = 'on')::int"))

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close twice")
	require.NoDirExists(t, s.dir)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err = pgx.Connect(ctx, s.DSN())
	require.Error(t, err, "the server is gone")
}

func TestPreferThrowaway(t *testing.T) {
	requireBinaries(t)
	s, err := Find(t.Context(), Options{NoEnv: true, PreferThrowaway: true, NoDocker: true})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, SourceThrowaway, s.Source())
}

// TestThrowawayRemovedWhenProgramDies runs a child that starts a cluster and
// exits without Close: the watchdog must stop the cluster and remove it, also
// when the cluster was crashed and started again (a new postmaster, a new
// watchdog).
func TestThrowawayRemovedWhenProgramDies(t *testing.T) {
	requireBinaries(t)
	if mode := os.Getenv("PGSERVER_TEST_CHILD"); mode != "" {
		s, err := Find(context.Background(), Options{NoEnv: true, NoLocal: true, NoDocker: true})
		if err == nil && mode == "restart" {
			if err = s.Crash(context.Background()); err == nil {
				err = s.Start(context.Background())
			}
		}
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("DIR", s.dir)
		os.Exit(0) // no Close
	}
	for _, mode := range []string{"plain", "restart"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestThrowawayRemovedWhenProgramDies$")
			cmd.Env = append(os.Environ(), "PGSERVER_TEST_CHILD="+mode)
			out, err := cmd.Output()
			require.NoError(t, err, string(out))
			var dir string
			for _, line := range strings.Split(string(out), "\n") {
				if d, ok := strings.CutPrefix(line, "DIR "); ok {
					dir = d
				}
			}
			require.NotEmpty(t, dir, string(out))
			require.Eventually(t, func() bool {
				_, err := os.Stat(dir)
				return errors.Is(err, os.ErrNotExist)
			}, 20*time.Second, 100*time.Millisecond, "watchdog removes %s", dir)
		})
	}
}

// countRecoveries counts the crash recoveries the cluster's log reports.
func countRecoveries(t *testing.T, s *Server) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	require.NoError(t, err)
	return strings.Count(string(b), "automatic recovery in progress")
}

// A throwaway cluster can be crashed (immediate shutdown: the next start runs
// crash recovery), stopped cleanly and started again on the same data
// directory and port; acknowledged commits survive with synchronous_commit on.
func TestThrowawayCrashStopStart(t *testing.T) {
	requireBinaries(t)
	ctx := t.Context()
	s, err := StartThrowaway(ctx, Options{Settings: map[string]string{"synchronous_commit": "on"}})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, SourceThrowaway, s.Source())
	require.FileExists(t, filepath.Join(s.DataDir(), "PG_VERSION"))
	require.Equal(t, 1, queryInt(t, s.DSN(), "SELECT (current_setting('synchronous_commit') = 'on')::int"), "Settings override the defaults")
	require.Equal(t, 0, queryInt(t, s.DSN(), "SELECT (current_setting('fsync') = 'on')::int"), "other defaults stay")
	uid, _, err := s.Owner()
	require.NoError(t, err)
	fi, err := os.Stat(s.DataDir())
	require.NoError(t, err)
	require.Equal(t, uint32(uid), fi.Sys().(*syscall.Stat_t).Uid, "Owner is the data directory's owner")

	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.DSN())
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		require.NoError(t, err)
	}
	exec("CREATE TABLE t (x int)")
	exec("INSERT INTO t VALUES (1)")
	// A session open across the crash sees its connection drop.
	held, err := pgx.Connect(ctx, s.DSN())
	require.NoError(t, err)
	defer held.Close(ctx)

	require.Equal(t, 0, countRecoveries(t, s))
	require.True(t, s.Running())
	require.NoError(t, s.Crash(ctx))
	require.False(t, s.Running())
	require.Error(t, s.Crash(ctx), "crashing a stopped cluster")
	require.Error(t, s.Stop(ctx), "stopping a stopped cluster")
	var one int
	require.Error(t, held.QueryRow(ctx, "SELECT 1").Scan(&one), "the open session was cut")
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = pgx.Connect(pctx, s.DSN())
	cancel()
	require.Error(t, err, "nothing answers while crashed")

	start := time.Now()
	require.NoError(t, s.Start(ctx))
	t.Logf("start after crash: %v", time.Since(start))
	require.True(t, s.Running())
	require.Equal(t, 1, countRecoveries(t, s), "Crash is an immediate shutdown: the start ran crash recovery")
	require.Equal(t, 1, queryInt(t, s.DSN(), "SELECT count(*)::int FROM t"), "the acknowledged insert survived")
	require.Error(t, s.Start(ctx), "starting a running cluster")

	exec("INSERT INTO t VALUES (2)")
	require.NoError(t, s.Restart(ctx))
	require.Equal(t, 1, countRecoveries(t, s), "Stop is clean: no recovery at the next start")
	require.Equal(t, 2, queryInt(t, s.DSN(), "SELECT count(*)::int FROM t"))

	require.NoError(t, s.Crash(ctx))
	dir := s.dir
	require.NoError(t, s.Close(), "Close of a crashed cluster")
	require.NoDirExists(t, dir)
	require.Error(t, s.Start(ctx), "starting a closed cluster")
}

// The controls refuse a server that is not a throwaway cluster (here the
// server every other test uses, which must keep running).
func TestControlsRefusedOnOtherSources(t *testing.T) {
	dsn := someDSN(t)
	s, err := Find(t.Context(), Options{URL: dsn})
	require.NoError(t, err)
	ctx := t.Context()
	for name, f := range map[string]func() error{
		"Crash":   func() error { return s.Crash(ctx) },
		"Stop":    func() error { return s.Stop(ctx) },
		"Start":   func() error { return s.Start(ctx) },
		"Restart": func() error { return s.Restart(ctx) },
		"Owner":   func() error { _, _, err := s.Owner(); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := f()
			require.ErrorIs(t, err, ErrNotThrowaway, name)
			var nt *NotThrowawayError
			require.ErrorAs(t, err, &nt)
			require.Equal(t, name, nt.Op)
			require.Equal(t, SourceURL, nt.Source)
		})
	}
	require.Empty(t, s.DataDir())
	require.True(t, s.Running())
	require.Equal(t, 1, queryInt(t, dsn, "SELECT 1"), "still running")
}

func TestStartThrowawayWithoutBinaries(t *testing.T) {
	t.Parallel()
	_, err := StartThrowaway(t.Context(), Options{BinDirs: []string{t.TempDir()}})
	require.ErrorIs(t, err, ErrNoBinaries)
	require.ErrorIs(t, err, ErrNoServer)
	require.Contains(t, err.Error(), "no initdb found")
}

func TestStartThrowawayBadSetting(t *testing.T) {
	requireBinaries(t)
	_, err := StartThrowaway(t.Context(), Options{Settings: map[string]string{"fsync=on -c x": "y"}})
	require.ErrorIs(t, err, ErrNoServer)
	require.NotErrorIs(t, err, ErrNoBinaries)
	require.Contains(t, err.Error(), "not a setting name")
}
