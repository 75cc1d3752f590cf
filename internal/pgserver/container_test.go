package pgserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeEngine answers GET /_ping as a Docker engine does; the search needs
// nothing more from the engine before it hands over to the starter.
func fakeEngine(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_ping" {
			_, _ = w.Write([]byte("OK"))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return "tcp://" + srv.Listener.Addr().String()
}

// withStarter registers f for the test and restores the previous starter
// after it (the tests that call it do not run in parallel).
func withStarter(t *testing.T, f ContainerStarter) {
	starterMu.Lock()
	prev := starter
	starterMu.Unlock()
	RegisterContainerStarter(f)
	t.Cleanup(func() { RegisterContainerStarter(prev) })
}

// A Docker engine that answers, in a program that did not import
// pgdcbtest/docker: the error says which import links Docker support.
func TestDockerEngineWithoutStarter(t *testing.T) {
	withStarter(t, nil)
	_, err := Find(t.Context(), Options{NoEnv: true, NoLocal: true, NoThrowaway: true, DockerHost: fakeEngine(t)})
	require.ErrorIs(t, err, ErrNoServer)
	require.Contains(t, err.Error(), `does not link Docker support: import _ "github.com/pgdcb/pgdcb/pgdcbtest/docker" (a module of its own)`)
}

// With a starter registered, the search hands the Docker source to it and
// returns its server; Close removes the container through the starter's
// close function, once.
func TestDockerEngineUsesRegisteredStarter(t *testing.T) {
	var started, closed atomic.Int32
	withStarter(t, func(_ context.Context, o *Options) (*Server, error) {
		started.Add(1)
		require.Equal(t, "postgres:16", o.Image)
		return NewContainerServer("postgres://postgres@container.invalid:5432/postgres", func() error {
			closed.Add(1)
			return nil
		}), nil
	})
	s, err := Find(t.Context(), Options{NoEnv: true, NoLocal: true, NoThrowaway: true, DockerHost: fakeEngine(t), Image: "postgres:16"})
	require.NoError(t, err)
	require.Equal(t, SourceDocker, s.Source())
	require.Equal(t, "postgres://postgres@container.invalid:5432/postgres", s.DSN())
	require.EqualValues(t, 1, started.Load())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	require.EqualValues(t, 1, closed.Load())
}
