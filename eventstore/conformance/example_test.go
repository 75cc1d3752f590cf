package conformance_test

import (
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore/conformance"
	"github.com/pgdcb/pgdcb/memstore"
)

// An implementation of pgdcb.Store runs the suite from a test of its
// own, on an empty store per check (here the in-memory store).
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		conformance.Run(t, func(t *testing.T) pgdcb.Store {
			return memstore.MustNew(nil)
		})
	}
}
