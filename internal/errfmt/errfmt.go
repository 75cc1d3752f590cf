// Package errfmt makes the library's error messages follow its convention
// (docs/CONVENTIONS.md): a message starts with "pgdcb: " once, then the
// operation that failed, then the cause; the errors it wraps keep their
// identity for errors.Is and errors.As but lose their own "pgdcb: " in the
// text, so that a chain reads "pgdcb: migrate runstore: schema not migrated:
// …", not "pgdcb: migrate runstore: pgdcb: schema not migrated: …".
package errfmt

import (
	"fmt"
	"strings"
)

// Prefix starts every message of the library.
const Prefix = "pgdcb: "

// Errorf is fmt.Errorf for the library's messages: format starts with
// Prefix, and every later ": pgdcb: " of the formatted text (the prefix of
// a wrapped error) is cut to ": ".
func Errorf(format string, args ...any) error {
	return &onePrefix{err: fmt.Errorf(format, args...)}
}

// Wrap returns err with the context op: "pgdcb: op: " and err's message
// without its own prefix, and without op again when err's message already
// starts with it ("pgdcb: append: append: …" was a message once). nil stays
// nil.
func Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return &wrapped{op: op, err: err}
}

type wrapped struct {
	op  string
	err error
}

func (e *wrapped) Error() string {
	inner := Trim(e.err.Error())
	if strings.HasPrefix(inner, e.op+": ") {
		return Prefix + inner
	}
	return Prefix + e.op + ": " + inner
}

// Unwrap returns the wrapped error.
func (e *wrapped) Unwrap() error { return e.err }

// Trim returns msg without its leading Prefix (and without one after each
// ": "), for a typed error's Error() that includes another error's text.
func Trim(msg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(msg, Prefix), ": "+Prefix, ": ")
}

type onePrefix struct{ err error }

func (e *onePrefix) Error() string {
	msg := e.err.Error()
	if !strings.HasPrefix(msg, Prefix) {
		return Trim(msg)
	}
	return Prefix + Trim(msg)
}

// Unwrap returns the formatted error, whose chain holds the wrapped ones.
func (e *onePrefix) Unwrap() error { return e.err }
