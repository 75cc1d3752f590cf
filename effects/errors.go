package effects

import (
	"errors"
	"fmt"

	"github.com/pgdcb/pgdcb"
)

// ErrNotFound: no effect has the given id (it was never requested, or
// retention removed it).
// It is pgdcb.ErrNotFound.
var ErrNotFound = pgdcb.ErrNotFound

// notFoundError names the effect that was not found. It matches ErrNotFound.
type notFoundError struct {
	ID string
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("pgdcb: effects: effect %q not found", e.ID)
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// handlerPanicError is the failure recorded for a handler that panicked.
type handlerPanicError struct {
	Type  string
	Value any
}

func (e *handlerPanicError) Error() string {
	return fmt.Sprintf("pgdcb: effects: handler for %q panicked: %v", e.Type, e.Value)
}

// errLeaseExpired is the last error of an effect whose last attempt's lease
// expired without a result (its worker died or outran the lease).
var errLeaseExpired = errors.New("pgdcb: effects: lease expired without a result (the worker died or the handler outran Config.Lease)")
