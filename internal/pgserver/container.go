package pgserver

import (
	"context"
	"errors"
	"sync"
)

// ContainerStarter starts PostgreSQL in a container once a Docker engine
// answers (the Docker source). Package pgdcbtest/docker, a module of its own,
// provides one through testcontainers-go and registers it when it is
// imported: testcontainers-go pulls in the Docker client and some fifty
// modules, which only a go.mod that requires that module pays for. pgdcb's
// own tests do not link it: make test runs its command pgcontainer when no
// other server can be had and passes the URL on.
type ContainerStarter func(ctx context.Context, o *Options) (*Server, error)

var (
	starterMu sync.Mutex
	starter   ContainerStarter
)

// RegisterContainerStarter makes f the Docker source's way of starting a
// container (the last registration wins).
func RegisterContainerStarter(f ContainerStarter) {
	starterMu.Lock()
	defer starterMu.Unlock()
	starter = f
}

// NewContainerServer is how a ContainerStarter returns its server: dsn is a
// superuser URL of the container's server, closeFn removes the container.
func NewContainerServer(dsn string, closeFn func() error) *Server {
	return &Server{dsn: dsn, source: SourceDocker, closeFn: closeFn}
}

// errNoContainerStarter is the Docker source's error when nothing
// registered a starter.
var errNoContainerStarter = errors.New(`this program does not link Docker support: import _ "github.com/pgdcb/pgdcb/pgdcbtest/docker" (a module of its own) in one of its test files`)

// startContainer starts a container with the registered starter.
func startContainer(ctx context.Context, o *Options) (*Server, error) {
	starterMu.Lock()
	f := starter
	starterMu.Unlock()
	if f == nil {
		return nil, errNoContainerStarter
	}
	return f(ctx, o)
}
