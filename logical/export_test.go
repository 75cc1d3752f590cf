package logical

import (
	"time"

	"github.com/pgdcb/pgdcb"
)

// SetTraceDelivery sets traceDelivery (nil ends it); call it while no reader
// runs.
func SetTraceDelivery(f func(ev *pgdcb.StoredEvent, sent, received, handed time.Time)) {
	traceDelivery = f
}

// CatchingUp reports whether r reads through the SQL interface (a catch-up)
// rather than the stream.
func CatchingUp(r *Reader) bool { return r.cu != nil }

// SetCatchUpAfter sets how long a stream runs before it may switch to a
// catch-up; call it while no reader runs.
func SetCatchUpAfter(d time.Duration) (restore func()) {
	old := catchUpAfter
	catchUpAfter = d
	return func() { catchUpAfter = old }
}

// Names the external tests use for types and methods the package keeps to
// itself.
type (
	Sync          = syncRead
	SlotLostError = slotLostError
)

func (c Checkpoint) Equal(o Checkpoint) bool { return c.equal(o) }

func (c Checkpoint) IsZero() bool { return c.isZero() }
