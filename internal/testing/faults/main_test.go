package faults_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Environment of the child processes the suite starts (scenario 3): the
// child's role, and the cluster and schema it works on. A child never starts
// a cluster of its own.
const (
	childEnv  = "PGDCB_FAULTS_CHILD"
	dsnEnv    = "PGDCB_FAULTS_DSN"
	schemaEnv = "PGDCB_FAULTS_SCHEMA"
)

// clusterSettings make an acknowledged commit survive a crash of the server
// process: synchronous_commit is on (the throwaway default is off). fsync
// stays off: the suite crashes PostgreSQL, never the machine, and a write()
// into the page cache survives a process crash.
var clusterSettings = map[string]string{
	"synchronous_commit": "on",
	"max_connections":    "120",
	// The logical decoding mode's scenarios (logical_test.go).
	"wal_level":             "logical",
	"max_replication_slots": "20",
	"max_wal_senders":       "20",
}

var (
	srv     *pgserver.Server // the suite's throwaway cluster
	skipWhy string           // why there is none, when it is for want of binaries
	results summary
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run())
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := pgserver.StartThrowaway(ctx, pgserver.Options{Settings: clusterSettings})
	cancel()
	switch {
	case errors.Is(err, pgserver.ErrNoBinaries):
		skipWhy = "the fault suite needs local PostgreSQL binaries (initdb, postgres) to start a cluster it may crash, and found none: " + err.Error()
		fmt.Fprintln(os.Stderr, "faults: skipping:", skipWhy)
	case err != nil:
		fmt.Fprintln(os.Stderr, "faults: starting the throwaway cluster:", err)
		os.Exit(1)
	default:
		srv = s
	}
	code := m.Run()
	if srv != nil {
		if err := srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "faults:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	results.print(os.Stdout, time.Since(began))
	os.Exit(code)
}

// cluster returns the suite's cluster, skipping the test when there is none
// for want of PostgreSQL binaries. It makes sure the cluster runs (a failed
// scenario may have left it crashed).
func cluster(t *testing.T) *pgserver.Server {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if !srv.Running() {
		require.NoError(t, srv.Start(t.Context()))
	}
	return srv
}

// newPool returns a pool on the cluster; its sessions carry application_name
// app (so that they can be found in pg_stat_activity) and params.
func newPool(t *testing.T, app string, maxConns int32, params map[string]string) *pgxpool.Pool {
	return newPoolPinging(t, app, maxConns, params, false)
}

// newPoolPinging is newPool; with pingAlways the pool pings every
// connection it hands out.
func newPoolPinging(t *testing.T, app string, maxConns int32, params map[string]string, pingAlways bool) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(cluster(t).DSN())
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	if pingAlways {
		// The checks' pool pings every connection it hands out: after a
		// crash its idle connections are dead, and a check must not fail
		// on one (pgxpool pings only connections idle for a second or
		// more). The writers' pools keep pgxpool's default: what the store
		// does with a dead connection is under test there.
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// serverExec runs statements on a connection of its own (a pool's
// connections may be dead after a crash), trying again for a few seconds
// while the server does not answer.
func serverExec(ctx context.Context, stmts ...string) error {
	var err error
	await.Within(2*time.Second, func() (bool, string) {
		var conn *pgx.Conn
		if conn, err = pgx.Connect(ctx, srv.DSN()); err != nil {
			return false, ""
		}
		defer conn.Close(context.Background())
		for _, st := range stmts {
			if _, err = conn.Exec(ctx, st); err != nil {
				return false, ""
			}
		}
		return true, ""
	})
	return err
}

// env is one scenario's schema on the cluster: a store on a writers' pool
// and an admin pool for set-up and checks.
type env struct {
	schema string
	quoted string
	admin  *pgxpool.Pool
}

// newEnv migrates a fresh schema, dropped when the test ends.
func newEnv(t *testing.T) *env {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "faults_" + hex.EncodeToString(b[:])
	admin := newPoolPinging(t, "faults_admin", 4, nil, true)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !srv.Running() {
			_ = srv.Start(ctx)
		}
		conn, err := pgx.Connect(ctx, srv.DSN())
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	_, err := pgdcbsql.Migrate(t.Context(), admin, schema)
	require.NoError(t, err)
	return &env{schema: schema, quoted: pgx.Identifier{schema}.Sanitize(), admin: admin}
}

// store returns a store on the env's schema over pool.
func (e *env) store(t *testing.T, pool *pgxpool.Pool, cfg *eventstore.Config) *eventstore.Store {
	t.Helper()
	c := eventstore.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.Schema = e.schema
	s, err := eventstore.New(pool, &c)
	require.NoError(t, err)
	return s
}

// figures is one scenario's line of the summary.
type figures struct {
	Scenario string
	// Attempts is the number of writes tried (appends, commands, kills).
	Attempts int
	// Acked succeeded; Definite failed with an error that does not match
	// pgdcb.ErrOutcomeUnknown; Unknown failed with one that does.
	Acked, Definite, Unknown int
	// UnknownCommitted is how many unknown outcomes had in fact committed.
	UnknownCommitted int
	// Violations: acknowledged but absent, present more than once, present
	// in part, failed with a definite error but committed, acknowledged with
	// other positions than the log's.
	Lost, Duplicated, Partial, DefiniteCommitted, Misreported int
	// Settle is what the store settled (eventstore.SettleStats): the
	// failures it turned into an answer (Present, Absent) before the
	// caller saw them; Unknown above is what was left after settling.
	Settle eventstore.SettleStats
	// Recovery is how long writes took to succeed again after the fault
	// ended (the start of the server, the last kill, …); 0 when not measured.
	Recovery time.Duration
	// Elapsed is the scenario's duration.
	Elapsed time.Duration
	// Note says what else was measured.
	Note string
}

func (f figures) line() string {
	rec := "-"
	if f.Recovery > 0 {
		rec = f.Recovery.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%-26s attempts=%d acked=%d definite=%d settled=%s unknown-after-settling=%d (committed %d) lost=%d duplicated=%d partial=%d definite-committed=%d misreported=%d recovery=%s elapsed=%s %s",
		f.Scenario, f.Attempts, f.Acked, f.Definite, f.settled(), f.Unknown, f.UnknownCommitted,
		f.Lost, f.Duplicated, f.Partial, f.DefiniteCommitted, f.Misreported, rec, f.Elapsed.Round(time.Millisecond), f.Note)
}

// settled renders the settle counters: present/absent (resent).
func (f figures) settled() string {
	st := f.Settle
	if st == (eventstore.SettleStats{}) {
		return "-"
	}
	return fmt.Sprintf("%d/%d (%d)", st.Present, st.Absent, st.Resent)
}

// summary collects the figures of every scenario for the table TestMain
// prints.
type summary struct {
	mu   sync.Mutex
	rows []figures
}

// record logs the figures and keeps them for the summary.
func record(t *testing.T, f figures) {
	t.Helper()
	t.Log("figures: " + f.line())
	results.mu.Lock()
	results.rows = append(results.rows, f)
	results.mu.Unlock()
}

func (s *summary) print(w io.Writer, total time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rows) == 0 {
		return
	}
	rows := append([]figures(nil), s.rows...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Scenario < rows[j].Scenario })
	var b strings.Builder
	fmt.Fprintf(&b, "\nfault suite figures (whole package %s)\n", total.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "| %-28s | %8s | %6s | %8s | %18s | %23s | %4s | %4s | %7s | %10s | %6s | %9s | %8s |\n",
		"scenario", "attempts", "acked", "definite", "settled pres./abs.", "unknown after settling", "lost", "dup.", "partial", "def.-comm.", "misrep", "recovery", "elapsed")
	fmt.Fprintf(&b, "|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 30), strings.Repeat("-", 10),
		strings.Repeat("-", 8), strings.Repeat("-", 10), strings.Repeat("-", 20), strings.Repeat("-", 25), strings.Repeat("-", 6),
		strings.Repeat("-", 6), strings.Repeat("-", 9), strings.Repeat("-", 12), strings.Repeat("-", 8), strings.Repeat("-", 11), strings.Repeat("-", 10))
	for _, f := range rows {
		rec := "-"
		if f.Recovery > 0 {
			rec = f.Recovery.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %-28s | %8d | %6d | %8d | %18s | %23s | %4d | %4d | %7d | %10d | %6d | %9s | %8s |\n",
			f.Scenario, f.Attempts, f.Acked, f.Definite, f.settled(), fmt.Sprintf("%d (%d committed)", f.Unknown, f.UnknownCommitted),
			f.Lost, f.Duplicated, f.Partial, f.DefiniteCommitted, f.Misreported, rec, f.Elapsed.Round(10*time.Millisecond))
	}
	for _, f := range rows {
		if f.Note != "" {
			fmt.Fprintf(&b, "  %s: %s\n", f.Scenario, f.Note)
		}
	}
	_, _ = io.WriteString(w, b.String())
}
