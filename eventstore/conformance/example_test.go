package conformance_test

import (
	"testing"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/eventstore/conformance"
	"github.com/pgdcb/pgdcb/memstore"
)

// An implementation of eventstore.Interface runs the suite from a test of its
// own, on an empty store per check (here the in-memory store).
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		conformance.Run(t, func(t *testing.T) eventstore.Interface {
			return memstore.MustNew(nil)
		})
	}
}
