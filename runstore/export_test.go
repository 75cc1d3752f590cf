package runstore

// Test hooks.

// Marker is the metadata every run event carries.
const Marker = marker

// SetBeforeResync makes the projector call f before each resync, with the
// runs it rebuilds, while they are marked STALE.
func SetBeforeResync(p *SnapshotProjector, f func([]StaleRun)) { p.beforeResync = f }

// UnreflectedSQL is CatchUp's check, for the test that reads its plan.
func UnreflectedSQL(s *Store) string { return s.sql.unreflected }
