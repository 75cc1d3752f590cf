//go:build testcontainers

package pgserver

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// defaultImage is the container image of the Docker source.
const defaultImage = "postgres:17-alpine"

// startContainer runs PostgreSQL in a container through testcontainers-go.
// testcontainers-go finds the engine on its own (DOCKER_HOST,
// ~/.testcontainers.properties, the usual sockets); its reaper removes the
// container if the program dies without calling Close.
func startContainer(ctx context.Context, o *Options) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, o.startTimeout(3*time.Minute))
	defer cancel()
	image := o.Image
	if image == "" {
		image = defaultImage
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
	return &Server{
		dsn:    dsn,
		source: SourceDocker,
		closeFn: func() error {
			return testcontainers.TerminateContainer(c)
		},
	}, nil
}
