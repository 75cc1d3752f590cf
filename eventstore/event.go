package eventstore

import (
	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/storekit"
)

// validate checks a batch in Go before anything is sent (storekit.ValidateEvents).
func (s *Store) validate(events []pgdcb.Event) error {
	return storekit.ValidateEvents(s.cfg.limits(), events)
}

// prepare is what an append does to its events before anything is sent:
// the version of each event of a type with upcasters is recorded in its
// metadata (storekit.Stamp; events itself is not changed), then the batch
// is validated.
func (s *Store) prepare(events []pgdcb.Event) ([]pgdcb.Event, error) {
	events, err := storekit.Stamp(s.cfg.Upcasters, events)
	if err != nil {
		return nil, err
	}
	return events, s.validate(events)
}
