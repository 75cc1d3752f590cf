package effects

import (
	"errors"
	"fmt"
)

// ErrNotFound: no effect has the given id (it was never requested, or
// retention removed it).
var ErrNotFound = errors.New("effects: effect not found")

// NotFoundError names the effect that was not found. It matches ErrNotFound.
type NotFoundError struct {
	ID string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("effects: effect %q not found", e.ID)
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// HandlerPanicError is the failure recorded for a handler that panicked.
type HandlerPanicError struct {
	Type  string
	Value any
}

func (e *HandlerPanicError) Error() string {
	return fmt.Sprintf("effects: handler for %q panicked: %v", e.Type, e.Value)
}

// errLeaseExpired is the last error of an effect whose last attempt's lease
// expired without a result (its worker died or outran the lease).
var errLeaseExpired = errors.New("effects: lease expired without a result (the worker died or the handler outran Config.Lease)")
