package logical

import (
	"time"

	"github.com/pgdcb/pgdcb/eventstore"
)

// SetTraceDelivery sets traceDelivery (nil ends it); call it while no reader
// runs.
func SetTraceDelivery(f func(ev *eventstore.StoredEvent, sent, received, handed time.Time)) {
	traceDelivery = f
}

// CatchingUp reports whether r reads through the SQL interface (a catch-up)
// rather than the stream.
func CatchingUp(r *Reader) bool { return r.cu != nil }
