// Package readpipe lets package logical, which decodes the events table's
// rows itself (from the WAL), pass them through the read pipeline of the
// *eventstore.Store they came from, as every other read path does. Package
// eventstore sets both hooks when it is initialised; store is always an
// *eventstore.Store (readpipe cannot name it: eventstore imports it).
package readpipe

import (
	"context"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

var (
	// Present runs the store's read pipeline over evs, in place (see
	// eventstore's present).
	Present func(ctx context.Context, store any, evs []pgdcb.StoredEvent) error
	// Query returns q as the store runs it: the types of renamed event
	// types widened to all their names (storekit.Expand). A reader matching
	// stored rows in Go matches them against it.
	Query func(store any, q query.Query) query.Query
	// Active reports whether the store's pipeline has a step to run
	// (when not, Present does nothing, and a reader need not gather
	// batches for it).
	Active func(store any) bool
)
