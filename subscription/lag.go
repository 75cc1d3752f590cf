package subscription

import (
	"time"

	"github.com/pgdcb/pgdcb"
)

// Lag says how far a tailing reader is behind the head of the log.
type Lag struct {
	// Events is approximately how many events (of any type) sort after the
	// last delivered one: the head's position minus that event's position.
	// Positions are not strictly in log order across concurrent
	// transactions, so it is an estimate; 0 when caught up.
	Events int64
	// Behind is the age of the last delivered event while the reader is
	// behind the head; 0 when caught up (or before the first delivery).
	Behind time.Duration
	// HorizonHeld is how long the horizon (pgdcb.TailBatch.Horizon) has
	// stayed at the same transaction while the head was at or above it: how
	// long an open transaction of the store's database has been delaying the
	// reader.
	HorizonHeld time.Duration
	// HorizonHolder is the transaction delaying the reader while HorizonHeld
	// is not zero (its backend's pid and its database, when known).
	HorizonHolder pgdcb.HorizonHolder
}
