package eventstore

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
