// Package docker links Docker support into the test server search of
// pgdcbtest: once imported, a test binary that finds no PostgreSQL through
// PGDCB_TEST_DATABASE_URL, on 127.0.0.1:5432 or from local PostgreSQL
// binaries starts one in a container through testcontainers-go, when a
// Docker engine answers.
//
//	go get github.com/pgdcb/pgdcb/pgdcbtest/docker
//
//	import _ "github.com/pgdcb/pgdcb/pgdcbtest/docker"
//
// It is a module of its own because testcontainers-go pulls in the Docker
// client and some fifty modules: a go.mod gets them only by requiring this
// module, not by importing pgdcbtest. Import it from a _test.go file, so
// that only test binaries link it. Its command pgcontainer starts a
// container and prints its URL (make test uses it when nothing else
// answers).
package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/pgdcb/pgdcb/internal/pgserver"
)

// DefaultImage is the container image used unless the search's options name
// another.
const DefaultImage = "postgres:17-alpine"

// defaultStartTimeout bounds starting a container, which may pull an image.
const defaultStartTimeout = 3 * time.Minute

func init() { pgserver.RegisterContainerStarter(start) }

// start runs PostgreSQL in a container through testcontainers-go.
// testcontainers-go finds the engine on its own (DOCKER_HOST,
// ~/.testcontainers.properties, the usual sockets); its reaper removes the
// container if the program dies without calling Close.
func start(ctx context.Context, o *pgserver.Options) (*pgserver.Server, error) {
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	image := o.Image
	if image == "" {
		image = DefaultImage
	}
	c, err := tcpostgres.Run(ctx, image,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
		testcontainers.WithCmd("postgres",
			"-c", "max_connections=100",
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off"),
	)
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return nil, fmt.Errorf("starting %s: %w", image, err)
	}
	dsn, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("container connection string: %w", err)
	}
	return pgserver.NewContainerServer(dsn, func() error {
		return testcontainers.TerminateContainer(c)
	}), nil
}
