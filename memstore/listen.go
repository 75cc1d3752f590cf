package memstore

import "context"

// Listen calls wake after appends commit, until ctx ends; it then returns
// ctx's error (see pgdcb.Store.Listen). It calls wake once as soon as
// it listens. Appends that commit while wake runs are coalesced into one more
// call. wake is called from Listen's goroutine.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	ch := make(chan struct{}, 1)
	s.lmu.Lock()
	s.listeners[ch] = struct{}{}
	s.lmu.Unlock()
	defer func() {
		s.lmu.Lock()
		delete(s.listeners, ch)
		s.lmu.Unlock()
	}()
	wake()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
			wake()
		}
	}
}

// notify wakes every listener; it never blocks.
func (s *Store) notify() {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	for ch := range s.listeners {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
