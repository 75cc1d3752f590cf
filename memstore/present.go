package memstore

import (
	"context"

	"github.com/pgdcb/pgdcb"
)

// present is the read pipeline, eventstore's present in memory: every event
// a read hands out (read, ReadTail, and Project through Read) passes
// through it, in place, outside the lock. Steps in order: open sealed fields
// (erase.go; null where the subject was erased), then upcast
// (Config.Upcasters). An error names the event's position; nothing is
// skipped.
func (s *Store) present(ctx context.Context, evs []pgdcb.StoredEvent) error {
	_ = ctx
	s.openSealed(evs)
	if up := s.upcasters; up != nil {
		for i := range evs {
			if err := up.Apply(&evs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}
