//go:build !unix

package pgserver

import (
	"context"
	"runtime"
)

// findThrowaway is not supported off Unix: it relies on a shell watchdog and
// on Unix process credentials.
func findThrowaway(_ context.Context, o *Options) (*Server, string) {
	if o.NoThrowaway {
		return nil, "throwaway cluster not tried (disabled)"
	}
	s, why, _ := tryThrowaway(context.Background(), o)
	return s, why
}

// tryThrowaway says why there is no throwaway cluster off Unix.
func tryThrowaway(_ context.Context, _ *Options) (*Server, string, bool) {
	return nil, "throwaway clusters are not supported on " + runtime.GOOS, false
}
