// Package multitrace is the body of the components' MultiTracer functions
// (eventstore's aside): a list of tracers whose Start methods chain their
// contexts, whose End methods all run, and whose optional interfaces are
// found by type assertion (docs/CONVENTIONS.md "Observability").
package multitrace

import "context"

// NonNil returns the tracers that are not nil.
func NonNil[T comparable](tracers []T) []T {
	var zero T
	var out []T
	for _, t := range tracers {
		if t != zero {
			out = append(out, t)
		}
	}
	return out
}

// Start calls start on each tracer in turn, each on the context the
// previous one returned, and returns the last.
func Start[T, D any](ts []T, ctx context.Context, d D, start func(T, context.Context, D) context.Context) context.Context {
	for _, t := range ts {
		ctx = start(t, ctx, d)
	}
	return ctx
}

// End calls end on each tracer.
func End[T, D any](ts []T, ctx context.Context, d D, end func(T, context.Context, D)) {
	for _, t := range ts {
		end(t, ctx, d)
	}
}

// Each calls f with each tracer that implements the optional interface P.
func Each[P, T any](ts []T, f func(P)) {
	for _, t := range ts {
		if p, ok := any(t).(P); ok {
			f(p)
		}
	}
}
