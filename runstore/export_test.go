package runstore

// Test hooks.

// RunTailSQL is the projector's tail statement ($1, $2: checkpoint, $3: limit).
func (s *Store) RunTailSQL() string { return s.sql.runTail }

// SetBeforeResync makes the projector call f before each resync, with the
// runs it rebuilds, while they are marked STALE.
func SetBeforeResync(p *SnapshotProjector, f func([]StaleRun)) { p.beforeResync = f }
