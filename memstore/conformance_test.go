package memstore_test

import (
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore/conformance"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/upcast"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.RunWithOptions(t, func(t *testing.T) pgdcb.Store { return memstore.MustNew(nil) },
		&conformance.Options{Rounds: 30, WithUpcasters: func(_ testing.TB, reg *upcast.Registry) pgdcb.Store {
			return memstore.MustNew(&memstore.Config{Upcasters: reg})
		}})
}
