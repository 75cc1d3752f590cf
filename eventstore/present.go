package eventstore

import (
	"context"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/readpipe"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/query"
)

// present is the read pipeline: every event any read path hands out passes
// through it, in batches, after it is read from the events table and before
// anyone sees it — Read, ReadAll, ReadLast (readOnce), Project and its
// decision snapshots (foldFrom), ReadTail and the subscriptions, tailing
// projections, outbox and effects built on it, and package logical's
// readers (through internal/readpipe). It changes evs in place. Its steps
// run in this order, each over the whole batch:
//
//  1. open sealed fields (Config.KEK; keys.go): values sealed for a subject
//     (pgdcb.Personal) in clear, null once the subject is erased. It needs
//     the stored bytes, so it runs first.
//  2. upcast (Config.Upcasters): renamed types take their current name, old
//     versions are brought to the current shape (package upcast).
//
// A step's error fails the read, naming the event's position
// (*upcast.Error): no event is ever skipped. A store with no step to run
// returns at once.
func (s *Store) present(ctx context.Context, evs []pgdcb.StoredEvent) error {
	if err := s.keys.openEvents(ctx, evs); err != nil {
		return err
	}
	if up := s.cfg.Upcasters; up != nil {
		for i := range evs {
			if err := up.Apply(&evs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// presents reports whether present has a step to run.
func (s *Store) presents() bool { return s.cfg.Upcasters != nil || s.cfg.KEK != nil }

// presentBatch is how many events a streaming read (readOnce, foldFrom)
// gathers before passing them through present.
const presentBatch = 64

// presentCap is the capacity of a read's batch: presentBatch, or its limit
// when smaller (ReadLast reads one event).
func presentCap(limit int) int {
	if limit > 0 && limit < presentBatch {
		return limit
	}
	return presentBatch
}

// expand returns q as the store runs it: every type of a renamed event type
// widened to all its names (storekit.Expand), so a read or condition naming
// either name sees the events stored under both.
func (s *Store) expand(q query.Query) query.Query { return storekit.Expand(s.cfg.Upcasters, q) }

func init() {
	readpipe.Present = func(ctx context.Context, store any, evs []pgdcb.StoredEvent) error {
		return store.(*Store).present(ctx, evs)
	}
	readpipe.Query = func(store any, q query.Query) query.Query { return store.(*Store).expand(q) }
	readpipe.Active = func(store any) bool { return store.(*Store).presents() }
}
