package eventstore

import (
	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/storekit"
)

// validate checks a batch in Go before anything is sent (storekit.ValidateEvents).
func (s *Store) validate(events []pgdcb.Event) error {
	return storekit.ValidateEvents(s.cfg.limits(), events)
}
