package eventstore

// BackgroundActive is how many appends and goroutines of s Close would wait
// for (tests).
func BackgroundActive(s *Store) int {
	s.bg.mu.Lock()
	defer s.bg.mu.Unlock()
	return s.bg.active
}
