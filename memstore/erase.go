package memstore

import (
	"context"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/seal"
	"github.com/pgdcb/pgdcb/internal/storekit"
)

// Erase forgets subject as eventstore.Store.Erase does: in one step it
// appends a pgdcb.ErasedEventType event tagged pgdcb.subject=<subject> and
// destroys the subject's data key; from then on reads give JSON null for
// every field sealed for the subject (pgdcb.Personal). The memory store
// seals like the PostgreSQL store, under random data keys it holds itself
// (no key-encryption key).
func (s *Store) Erase(ctx context.Context, subject string) (pgdcb.AppendResult, error) {
	ev, err := storekit.ErasedEvent(subject)
	if err != nil {
		return pgdcb.AppendResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return pgdcb.AppendResult{}, errfmt.Errorf("pgdcb: erase: %w", err)
	}
	s.mu.Lock()
	res, err := s.appendLocked([]pgdcb.Event{ev}, nil)
	if err == nil {
		if k, ok := s.keys[subject]; ok {
			delete(s.keys, subject)
			delete(s.keyByID, k.ID)
		}
	}
	s.mu.Unlock()
	if err == nil {
		s.notify()
	}
	return res, err
}

// sealLocked returns events with their personal fields sealed, making
// the subjects' keys that are missing. Under s.mu (write).
func (s *Store) sealLocked(events []pgdcb.Event, subjects []string) ([]pgdcb.Event, error) {
	keys := make(map[string]seal.Key, len(subjects))
	for _, sub := range subjects {
		k, ok := s.keys[sub]
		if !ok {
			k = seal.Key{ID: uuid.NewString(), Key: seal.NewKey()}
			s.keys[sub] = k
			s.keyByID[k.ID] = k.Key
		}
		keys[sub] = k
	}
	out := make([]pgdcb.Event, len(events))
	for i, e := range events {
		var err error
		if e.Data, err = seal.Seal(e.Data, keys); err == nil {
			e.Metadata, err = seal.Seal(e.Metadata, keys)
		}
		if err != nil {
			return nil, &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "data", Reason: err.Error()}
		}
		out[i] = e
	}
	return out, nil
}

// openSealed opens the sealed fields of evs in place (null where the key
// was erased): the read pipeline's first step, outside the read's lock.
func (s *Store) openSealed(evs []pgdcb.StoredEvent) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	key := func(id string) ([]byte, bool) {
		k, ok := s.keyByID[id]
		return k, ok
	}
	for i := range evs {
		evs[i].Data = seal.Open(evs[i].Data, key)
		if evs[i].Metadata != nil {
			evs[i].Metadata = seal.Open(evs[i].Metadata, key)
		}
	}
}
