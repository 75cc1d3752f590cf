// Package pgserver finds a PostgreSQL server to run tests, demos and
// benchmarks against.
//
// [Find] tries, in order:
//
//  1. an explicit URL ([Options.URL]) or the environment variable named by
//     [Options.EnvVar] (default PGDCB_TEST_DATABASE_URL);
//  2. a server already running on this machine (127.0.0.1:5432, then the unix
//     socket in /var/run/postgresql), as user postgres without a password;
//  3. a throwaway cluster made with local PostgreSQL binaries (initdb and
//     postgres found on PATH or under /usr/lib/postgresql/*/bin) in a temporary
//     directory, removed by [Server.Close];
//  4. a container, when a Docker engine answers and the program registered a
//     ContainerStarter (package pgdcbtest/docker, a module of its own, does,
//     through testcontainers-go, when imported).
//
// With [Options.PreferThrowaway] the order of the last three becomes 3, 4, 2.
// When nothing can be had, the error says what was tried and what is missing.
//
// [StartThrowaway] starts a throwaway cluster whatever else is available. A
// throwaway cluster (and only one) can be crashed ([Server.Crash]: an
// immediate shutdown, as `pg_ctl stop -m immediate`), stopped cleanly
// ([Server.Stop]) and started again on the same data directory and port
// ([Server.Start], [Server.Restart]), for fault tests; on a server from any
// other source these controls return a *NotThrowawayError.
// [Server.StartStandby] makes a streaming hot standby of a throwaway cluster
// (pg_basebackup -R on loopback, with an optional apply delay), which
// [Server.WaitReplay] waits for and [Server.Promote] promotes.
//
// The package is quiet unless [Options.Logger] is set.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Environment variables consulted by [Find] (see [Options.EnvVar]).
const (
	// TestEnvVar is the default: the DSN tests run against.
	TestEnvVar = "PGDCB_TEST_DATABASE_URL"
	// EnvVar is meant for non-test callers (demo, benchmark).
	EnvVar = "PGDCB_DATABASE_URL"
)

// DefaultLocalDSNs are the addresses probed for an already running server.
var DefaultLocalDSNs = []string{
	"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
	"postgres://postgres@/postgres?host=/var/run/postgresql&sslmode=disable",
}

// ErrNoServer is matched (errors.Is) by the error [Find] returns when no
// source yields a server.
var ErrNoServer = errors.New("pgserver: no PostgreSQL server available")

// Source says where a [Server] came from.
type Source string

const (
	SourceURL       Source = "url"       // Options.URL
	SourceEnv       Source = "env"       // the environment variable
	SourceLocal     Source = "local"     // a server already running here
	SourceThrowaway Source = "throwaway" // a cluster made from local binaries
	SourceDocker    Source = "docker"    // a testcontainers-go container
)

// Options tune [Find]. The zero value is the behaviour tests want.
type Options struct {
	// URL, when non-empty, is the server to use; nothing else is tried. It must
	// answer a ping. Default: empty.
	URL string

	// EnvVar names the environment variable read when URL is empty; a
	// non-empty value is used like URL. Default: TestEnvVar
	// (PGDCB_TEST_DATABASE_URL); the demo and the benchmark set EnvVar.
	EnvVar string

	// PreferThrowaway tries a throwaway cluster (then Docker) before a local
	// server already running, and falls back to that server only when neither
	// can be had. Default: false.
	PreferThrowaway bool

	// LocalDSNs are probed for a running server. Default: DefaultLocalDSNs.
	LocalDSNs []string

	// BinDirs are the directories searched for initdb and postgres. Default:
	// the directories on PATH, then /usr/lib/postgresql/*/bin. Among all
	// candidates the newest PostgreSQL version is tried first.
	BinDirs []string

	// DockerHost is the Docker engine address probed before trying
	// testcontainers-go. Default: $DOCKER_HOST, else
	// unix:///var/run/docker.sock.
	DockerHost string

	// Image is the container image for the Docker source. Default:
	// "postgres:17-alpine".
	Image string

	// NoEnv, NoLocal, NoThrowaway and NoDocker switch a source off.
	// Defaults: false (every source is on).
	NoEnv, NoLocal, NoThrowaway, NoDocker bool

	// PingTimeout bounds each probe of a URL or local server. Default: 2s.
	PingTimeout time.Duration

	// StartTimeout bounds starting a throwaway cluster or a container.
	// Default: 60s (3m for containers, which may pull an image).
	StartTimeout time.Duration

	// Settings are extra server settings of a throwaway cluster, passed as
	// `-c name=value` after the defaults (fsync=off, synchronous_commit=off,
	// full_page_writes=off, max_connections=100), which they override; for
	// example {"synchronous_commit": "on"} for tests that crash the cluster
	// and count on acknowledged commits surviving. Ignored by the other
	// sources. Default: none.
	Settings map[string]string

	// Logger, when set, receives one line per decision. Default: nil (quiet).
	Logger *slog.Logger
}

func (o *Options) envVar() string {
	if o.EnvVar != "" {
		return o.EnvVar
	}
	return TestEnvVar
}

func (o *Options) pingTimeout() time.Duration {
	if o.PingTimeout > 0 {
		return o.PingTimeout
	}
	return 2 * time.Second
}

func (o *Options) startTimeout(def time.Duration) time.Duration {
	if o.StartTimeout > 0 {
		return o.StartTimeout
	}
	return def
}

func (o *Options) log(msg string, args ...any) {
	if o.Logger != nil {
		o.Logger.Info("pgserver: "+msg, args...)
	}
}

// Server is a PostgreSQL server found or started by [Find].
type Server struct {
	dsn    string
	source Source
	dir    string     // throwaway cluster's directory, removed by Close
	ctl    controller // throwaway cluster's process control; nil otherwise

	closeFn   func() error
	closeOnce sync.Once
	closeErr  error
}

// DSN returns the connection string (URL form) of a superuser connection to
// the server's maintenance database.
func (s *Server) DSN() string { return s.dsn }

// Source says where the server came from.
func (s *Server) Source() Source { return s.source }

// Close stops and removes a throwaway cluster or container; for a server
// that was already running it does nothing. It is safe to call more than
// once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.closeFn != nil {
			s.closeErr = s.closeFn()
		}
	})
	return s.closeErr
}

// ErrNoBinaries is matched (errors.Is), besides ErrNoServer, by the error
// [StartThrowaway] returns when no PostgreSQL binaries (initdb and postgres)
// are found.
var ErrNoBinaries = errors.New("pgserver: no PostgreSQL binaries found")

// noServerError lists what Find tried.
type noServerError struct {
	tried      []string
	noBinaries bool
}

func (e *noServerError) Error() string {
	return ErrNoServer.Error() + ": " + strings.Join(e.tried, "; ")
}

func (e *noServerError) Is(target error) bool {
	return target == ErrNoServer || (e.noBinaries && target == ErrNoBinaries)
}

// StartThrowaway starts a throwaway cluster from local binaries, whatever
// the other sources offer (Options.URL, EnvVar, the No… switches and the
// Docker fields are ignored; Settings, BinDirs, StartTimeout and Logger
// apply). Unlike a server found by [Find] on another source, it can be
// crashed, stopped and started again ([Server.Crash], [Server.Stop],
// [Server.Start]). The error matches ErrNoBinaries (and ErrNoServer) when
// no initdb is found, ErrNoServer alone when the cluster cannot be started.
func StartThrowaway(ctx context.Context, opts Options) (*Server, error) {
	opts.NoThrowaway = false
	s, why, noBinaries := tryThrowaway(ctx, &opts)
	if s != nil {
		return s, nil
	}
	return nil, &noServerError{tried: []string{why}, noBinaries: noBinaries}
}

// ErrNotThrowaway is matched (errors.Is) by the error of the cluster controls
// ([Server.Crash], [Server.Stop], [Server.Start], [Server.Restart],
// [Server.Owner]) on a server that is not a throwaway cluster started by this
// process: a server found by URL, environment, on this machine or in a
// container is never crashed or stopped.
var ErrNotThrowaway = errors.New("pgserver: not a throwaway cluster")

// NotThrowawayError names the control that was refused and where the server
// came from. It matches ErrNotThrowaway.
type NotThrowawayError struct {
	// Op is the refused control: "Crash", "Stop", "Start", "Restart" or "Owner".
	Op string
	// Source is where the server came from.
	Source Source
}

func (e *NotThrowawayError) Error() string {
	return fmt.Sprintf("pgserver: %s refused: the server came from source %q; only a throwaway cluster started by this process can be crashed, stopped or started",
		e.Op, e.Source)
}

// Is makes errors.Is(err, ErrNotThrowaway) true.
func (e *NotThrowawayError) Is(target error) bool { return target == ErrNotThrowaway }

// controller runs the processes of a throwaway cluster.
type controller interface {
	crash(ctx context.Context) error
	stop(ctx context.Context) error
	start(ctx context.Context) error
	running() bool
	dataDir() string
	owner() (uid, gid int)
}

// DataDir returns the data directory of a throwaway cluster, "" for a server
// from any other source.
func (s *Server) DataDir() string {
	if s.ctl == nil {
		return ""
	}
	return s.ctl.dataDir()
}

// Running reports whether a throwaway cluster's postmaster is running (true
// for a server from any other source: it is not ours to know).
func (s *Server) Running() bool {
	if s.ctl == nil {
		return true
	}
	return s.ctl.running()
}

// Crash stops a throwaway cluster the way a crash would: an immediate
// shutdown (SIGQUIT to the postmaster, what `pg_ctl stop -m immediate`
// sends), with no checkpoint, so that the next [Server.Start] runs crash
// recovery. Clients see their connections drop. It returns once the
// postmaster has exited (killing it after 10 seconds). Only for a throwaway
// cluster (else a *NotThrowawayError); an error if it is not running.
func (s *Server) Crash(ctx context.Context) error {
	if s.ctl == nil {
		return &NotThrowawayError{Op: "Crash", Source: s.source}
	}
	return s.ctl.crash(ctx)
}

// Stop shuts a throwaway cluster down cleanly (fast shutdown: SIGINT to the
// postmaster, what `pg_ctl stop -m fast` sends: sessions are ended, a
// shutdown checkpoint is written). Only for a throwaway cluster (else a
// *NotThrowawayError); an error if it is not running.
func (s *Server) Stop(ctx context.Context) error {
	if s.ctl == nil {
		return &NotThrowawayError{Op: "Stop", Source: s.source}
	}
	return s.ctl.stop(ctx)
}

// Start starts a stopped or crashed throwaway cluster again on the same data
// directory, port and settings (the DSN does not change), and returns once it
// accepts connections (after crash recovery, if it crashed). ctx and
// Options.StartTimeout bound the wait. Only for a throwaway cluster (else a
// *NotThrowawayError); an error if it is already running.
func (s *Server) Start(ctx context.Context) error {
	if s.ctl == nil {
		return &NotThrowawayError{Op: "Start", Source: s.source}
	}
	return s.ctl.start(ctx)
}

// Restart is Stop then Start: a clean restart of a throwaway cluster.
func (s *Server) Restart(ctx context.Context) error {
	if s.ctl == nil {
		return &NotThrowawayError{Op: "Restart", Source: s.source}
	}
	if err := s.ctl.stop(ctx); err != nil {
		return err
	}
	return s.ctl.start(ctx)
}

// Owner returns the OS user and group the throwaway cluster's processes run
// as (the postgres user when this process runs as root), for example to
// chown a directory meant as a tablespace. Only for a throwaway cluster (else
// a *NotThrowawayError).
func (s *Server) Owner() (uid, gid int, err error) {
	if s.ctl == nil {
		return 0, 0, &NotThrowawayError{Op: "Owner", Source: s.source}
	}
	uid, gid = s.ctl.owner()
	return uid, gid, nil
}

// Find returns a server, following the order described in the package
// documentation. ctx bounds the search and any start-up; it does not bound
// the life of the returned server, which lasts until Close.
func Find(ctx context.Context, opts Options) (*Server, error) {
	if opts.URL != "" {
		return explicit(ctx, &opts, opts.URL, "Options.URL", SourceURL)
	}
	var tried []string
	name := opts.envVar()
	switch v := os.Getenv(name); {
	case opts.NoEnv:
		tried = append(tried, fmt.Sprintf("%s not consulted (disabled)", name))
	case v != "":
		return explicit(ctx, &opts, v, name, SourceEnv)
	default:
		opts.log("environment variable not set", "var", name)
		tried = append(tried, fmt.Sprintf("no %s set", name))
	}

	steps := []func(context.Context, *Options) (*Server, string){findLocal, findThrowaway, findDocker}
	if opts.PreferThrowaway {
		steps = []func(context.Context, *Options) (*Server, string){findThrowaway, findDocker, findLocal}
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			tried = append(tried, "gave up: "+err.Error())
			break
		}
		s, why := step(ctx, &opts)
		if s != nil {
			return s, nil
		}
		tried = append(tried, why)
	}
	return nil, &noServerError{tried: tried}
}

// explicit uses a configured DSN: it must answer, there is no fallback.
func explicit(ctx context.Context, o *Options, dsn, what string, src Source) (*Server, error) {
	if err := ping(ctx, dsn, o.pingTimeout()); err != nil {
		return nil, fmt.Errorf("pgserver: %s (%s) does not answer: %w", what, describe(dsn), err)
	}
	o.log("using configured server", "from", what, "server", describe(dsn))
	return &Server{dsn: dsn, source: src}, nil
}

// findLocal probes the local DSNs in order.
func findLocal(ctx context.Context, o *Options) (*Server, string) {
	if o.NoLocal {
		return nil, "local server not probed (disabled)"
	}
	dsns := o.LocalDSNs
	if dsns == nil {
		dsns = DefaultLocalDSNs
	}
	if len(dsns) == 0 {
		return nil, "no local server addresses to probe"
	}
	var misses []string
	for _, dsn := range dsns {
		err := ping(ctx, dsn, o.pingTimeout())
		if err == nil {
			o.log("using local server", "server", describe(dsn))
			return &Server{dsn: dsn, source: SourceLocal}, ""
		}
		o.log("no local server", "server", describe(dsn), "err", err)
		misses = append(misses, fmt.Sprintf("%s (%v)", where(dsn), shortErr(err)))
	}
	return nil, "nothing answering at " + strings.Join(misses, " or ")
}

// ping connects to dsn and runs an empty query within timeout.
func ping(ctx context.Context, dsn string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return err
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
}

// describe renders dsn without its password.
func describe(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "unparsable DSN"
	}
	return fmt.Sprintf("%s user=%s database=%s", where(dsn), cfg.User, cfg.Database)
}

// where renders the host (and port) dsn points at.
func where(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "unparsable DSN"
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return cfg.Host
	}
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}

// shortErr keeps the innermost, most telling part of a connection error.
func shortErr(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		return msg[i+2:]
	}
	return msg
}
