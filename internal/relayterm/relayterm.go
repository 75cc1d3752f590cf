// Package relayterm carries an outbox relay's leadership term in the context
// of a Publish call, for publishers that reconcile with their broker when a
// new term begins (outbox/jspublisher): a number unique to one relay's one
// term in this process.
package relayterm

import (
	"context"
	"sync/atomic"
)

type key struct{}

var last atomic.Uint64

// New returns a term no other call returned in this process.
func New() uint64 { return last.Add(1) }

// With returns ctx carrying term t.
func With(ctx context.Context, t uint64) context.Context { return context.WithValue(ctx, key{}, t) }

// Of returns the term ctx carries, if any.
func Of(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(key{}).(uint64)
	return t, ok
}
