// Command walletd serves the wallet reference application's HTTP API (see
// package wallet) until SIGINT or SIGTERM:
//
//	PGDCB_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/wallet/cmd/walletd -addr :8080
//
// The database is PGDCB_DATABASE_URL, else a PostgreSQL server running on this
// machine (127.0.0.1:5432, then the unix socket), as user postgres. At start it
// migrates the schema given by -schema (default "wallet") and creates the
// balances read model's tables, then runs the read model in the background.
// It logs one line per request (method, path, status, duration) on stderr.
// On a signal it stops accepting connections, lets requests in flight finish
// (at most -shutdown-timeout), stops the read model and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr, nil)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "walletd:", err)
		os.Exit(1)
	}
}

// errUsage: bad flags or arguments (the flag package has printed why).
var errUsage = errors.New("usage")

// defaultMaxConns is the pool size unless the DSN sets pool_max_conns.
const defaultMaxConns = 16

// run serves until ctx ends, then shuts down gracefully and returns nil. Logs
// go to logw; ready, if set, gets the listening address once requests are
// accepted.
// connStateHook is the HTTP server's ConnState; nil but in tests, which use
// it to know that the server has a request in hand (StateActive) instead of
// sleeping for it.
var connStateHook func(net.Conn, http.ConnState)

func run(ctx context.Context, args []string, logw io.Writer, ready func(addr string)) error {
	fs := flag.NewFlagSet("walletd", flag.ContinueOnError)
	fs.SetOutput(logw)
	addr := fs.String("addr", ":8080", "listen address (host:port; port 0 picks a free one)")
	schema := fs.String("schema", "wallet", "PostgreSQL schema of the event store (migrated at start)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "how long requests in flight may take to finish on SIGINT/SIGTERM")
	readDSN := fs.String("read-dsn", "", "a streaming hot standby of the database to send the store's reads to (docs/REPLICAS.md); default: read on the primary")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: walletd [-addr :8080] [-schema wallet] [-shutdown-timeout 10s] [-read-dsn DSN]\n\n"+
			"Serves the wallet HTTP API. The database is %s, else a local server.\n\n", pgserver.EnvVar)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(logw, "walletd: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	log := slog.New(slog.NewTextHandler(logw, nil))

	srv, err := pgserver.Find(ctx, pgserver.Options{EnvVar: pgserver.EnvVar, NoThrowaway: true, NoDocker: true})
	if err != nil {
		return fmt.Errorf("finding PostgreSQL (set %s): %w", pgserver.EnvVar, err)
	}
	defer srv.Close()
	pool, err := openPool(ctx, srv.DSN(), "the database")
	if err != nil {
		return err
	}
	defer pool.Close()

	applied, err := pgdcbsql.Migrate(ctx, pool, *schema)
	if err != nil {
		return fmt.Errorf("migrating schema %s: %w", *schema, err)
	}
	storeCfg := &eventstore.Config{Schema: *schema, Logger: log}
	if *readDSN != "" {
		readPool, err := openPool(ctx, *readDSN, "-read-dsn")
		if err != nil {
			return err
		}
		defer readPool.Close()
		storeCfg.ReadPool = readPool
	}
	store, err := eventstore.New(pool, storeCfg)
	if err != nil {
		return err
	}
	svc, err := wallet.New(store, nil)
	if err != nil {
		return err
	}
	balances := wallet.NewBalances(store, nil)
	if err := balances.Setup(ctx); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           accessLog(log, wallet.NewAPI(svc, balances)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         connStateHook,
		// Requests do not inherit ctx: a signal must not cancel commands in
		// flight (their outcome would be unknown); Shutdown waits for them.
	}

	// The read model runs until shutdown, restarting after errors.
	rmCtx, stopRM := context.WithCancel(context.WithoutCancel(ctx))
	var rm sync.WaitGroup
	rm.Go(func() {
		for rmCtx.Err() == nil {
			if err := balances.Run(rmCtx); err != nil {
				log.Error("balances read model stopped; restarting in 1s", "err", err)
				select {
				case <-rmCtx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	})
	defer func() { stopRM(); rm.Wait() }()

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("walletd listening", "addr", "http://"+ln.Addr().String(), "schema", *schema,
		"postgres", string(srv.Source()), "migrations_applied", len(applied))
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("walletd shutting down", "timeout", *shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("shutdown: requests still running after %v: %w", *shutdownTimeout, err)
	}
	stopRM()
	rm.Wait()
	log.Info("walletd stopped")
	return nil
}

// openPool opens a pool of defaultMaxConns connections on dsn (unless the DSN
// sets pool_max_conns), the primary's or -read-dsn's; from names it in errors.
func openPool(ctx context.Context, dsn, from string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", from, err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", from, err)
	}
	return pool, nil
}

// accessLog logs one line per request when its answer is written: method,
// path, status and duration.
func accessLog(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if sw.status == 0 {
				sw.status = http.StatusOK
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.Int("status", sw.status), slog.Duration("duration", time.Since(start)))
		}()
		h.ServeHTTP(sw, r)
	})
}

// statusWriter keeps the status a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
