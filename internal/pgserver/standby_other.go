//go:build !unix

package pgserver

import (
	"context"
	"errors"
	"time"
)

// StandbyOptions tune [Server.StartStandby] (see the Unix build).
type StandbyOptions struct {
	ApplyDelay   time.Duration
	Settings     map[string]string
	StartTimeout time.Duration
}

// StartStandby is not supported off Unix (throwaway clusters are not).
func (s *Server) StartStandby(_ context.Context, _ StandbyOptions) (*Server, error) {
	return nil, errors.New("pgserver: StartStandby: throwaway clusters are not supported on this system")
}
