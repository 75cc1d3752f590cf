package pgtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pgdcb/pgdcb/internal/pgserver"
)

// shared is a throwaway server (or pair) shared by the tests of a process:
// started on first use, stopped by Main.
type shared[T interface{ Close() error }] struct {
	what  string // for messages: "standby pair"
	start func(ctx context.Context) (T, error)

	mu      sync.Mutex
	started bool
	v       T
	err     error
}

// get returns the server, starting it on first use (bounded by 2 minutes);
// it skips the test when there are no local PostgreSQL binaries and fails
// it when the start failed.
func (s *shared[T]) get(tb testing.TB) T {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s.v, s.err = s.start(ctx)
		s.started = true
	}
	if errors.Is(s.err, pgserver.ErrNoBinaries) {
		tb.Skipf("pgtest: no %s: %v", s.what, s.err)
	}
	if s.err != nil {
		tb.Fatalf("pgtest: %s: %v", s.what, s.err)
	}
	return s.v
}

// close stops the server if it was started (Main).
func (s *shared[T]) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.err != nil {
		return nil
	}
	var zero T
	err := s.v.Close()
	s.v, s.started = zero, false
	return err
}
