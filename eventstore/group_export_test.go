package eventstore

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// QueuedAppends is how many appends wait in s's group queue (tests).
func QueuedAppends(s *Store) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queue)
}

// GroupSenders is how many senders of s are at work (tests).
func GroupSenders(s *Store) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return s.group.senders
}

// AwaitGroupState waits until cond (called with nothing locked) holds,
// checking it again at every change of s's queue, senders or gates; it
// fails only when ctx ends first (tests).
func AwaitGroupState(ctx context.Context, s *Store, cond func() bool) error {
	for {
		s.group.mu.Lock()
		if s.group.changed == nil {
			s.group.changed = make(chan struct{})
		}
		ch := s.group.changed
		s.group.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// SetGroupRetryHook makes f run before each member of a failed group is
// retried alone on conn (tests; set it before any append).
func SetGroupRetryHook(s *Store, f func(conn *pgxpool.Conn, i int)) {
	s.group.retryHook = f
}

// SetSendHook makes f run on the connection of each append without grouping
// just before it is sent (tests; set it before any append).
func SetSendHook(s *Store, f func(conn *pgxpool.Conn)) {
	s.sendHook = f
}
