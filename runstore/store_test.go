package runstore_test

import (
	"context"
	"testing"

	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/runstore/conformance"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) runstore.StateStore { return newStore(t, nil) })
}

// Without the runSeq hint cache every append takes the fallback read.
func TestConformanceNoCache(t *testing.T) {
	conformance.RunWithOptions(t, func(t *testing.T) runstore.StateStore {
		return newStore(t, &runstore.Config{SeqCacheDisabled: true})
	}, &conformance.Options{Rounds: 1})
}

var _ = context.Background
