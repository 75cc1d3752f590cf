package runstore_test

import (
	"testing"

	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/runstore/conformance"
)

// writeAt is conformance.Options.WriteAt for this store: a run event written
// around the append authority (see writeRunEventAt).
func writeAt(t *testing.T, s runstore.StateStore, ev runstore.CanonicalEngineEvent) {
	writeRunEventAt(t, s.(*runstore.Store).EventStore(), ev)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.RunWithOptions(t, func(t *testing.T) runstore.StateStore { return newStore(t, nil) },
		&conformance.Options{WriteAt: writeAt})
}

// Without the runSeq hint cache every append takes the fallback read. The
// watermark test reads as for a store that may show gaps (this one shows
// none: the reader is never STALE).
func TestConformanceNoCache(t *testing.T) {
	t.Parallel()
	conformance.RunWithOptions(t, func(t *testing.T) runstore.StateStore {
		return newStore(t, &runstore.Config{SeqCacheDisabled: true})
	}, &conformance.Options{Rounds: 1, MayShowGaps: true, WriteAt: writeAt})
}
