//go:build !testcontainers

package pgserver

import (
	"context"
	"errors"
)

// startContainer needs testcontainers-go, which is only compiled in with
// -tags testcontainers (it pulls in the Docker client and many modules).
func startContainer(context.Context, *Options) (*Server, error) {
	return nil, errors.New("this binary was built without -tags testcontainers")
}
