// Command pgcontainer starts PostgreSQL in a container (through package
// pgdcbtest/docker, when a Docker engine answers), prints its URL on a line
// of its own, and removes the container when its standard input closes or
// it is interrupted. make test runs it when no other server can be had, and
// runs every module's tests with PGDCB_TEST_DATABASE_URL set to the URL:
//
//	go run ./cmd/pgcontainer   # in pgdcbtest/docker
//
// It exits with 1, saying why, when no container can be started.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgdcb/pgdcb/internal/pgserver"
	_ "github.com/pgdcb/pgdcb/pgdcbtest/docker" // the Docker source
)

func main() {
	opts := pgserver.Options{NoEnv: true, NoLocal: true, NoThrowaway: true}
	if os.Getenv("PGDCB_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	s, err := pgserver.Find(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgcontainer: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(s.DSN())

	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // until the caller closes it
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-done:
	case <-sig:
	}
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "pgcontainer: removing the container: %v\n", err)
		os.Exit(1)
	}
}
