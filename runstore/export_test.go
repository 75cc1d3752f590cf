package runstore

// Test hooks.

// Marker is the metadata every run event carries.
const Marker = marker

// SetBeforeResync makes the projector call f before each resync, with the
// runs it rebuilds, while they are marked STALE.
func SetBeforeResync(p *SnapshotProjector, f func([]StaleRun)) { p.beforeResync = f }
