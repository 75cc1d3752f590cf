package pgtest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// Recorder is a testing.TB that records failures instead of failing, and
// runs its cleanups when Run returns: for tests of test helpers (does this
// helper fail, and with what message?), for measuring a test's set-up and
// clean-up in a benchmark, and for runnable examples, which have no
// *testing.T. Methods it does not define go to the embedded TB, which may be
// nil when only Helper, Context, Cleanup and the failing methods (Error,
// Errorf, Fail, FailNow, Fatal, Fatalf, Failed) are used.
type Recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	cleanups []func()
}

// Helper does nothing.
func (r *Recorder) Helper() {}

// Context is context.Background().
func (r *Recorder) Context() context.Context { return context.Background() }

// Cleanup registers f to run, last registered first, when Run returns.
func (r *Recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Errorf records a failure.
func (r *Recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// Fatalf records a failure and ends the body Run is running.
func (r *Recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }

// Fatal is Fatalf with Sprint's formatting.
func (r *Recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// Error is Errorf with Sprint's formatting.
func (r *Recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

// Fail records a failure without a message.
func (r *Recorder) Fail() { r.Errorf("Fail") }

// FailNow records a failure and ends the body Run is running (testify's
// require calls Errorf, then FailNow).
func (r *Recorder) FailNow() { r.Errorf("FailNow"); runtime.Goexit() }

// Failed reports whether a failure was recorded.
func (r *Recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

// Run runs body on r in a goroutine of its own (so that Fatalf can end it),
// then the cleanups, and returns every failure recorded so far.
func (r *Recorder) Run(body func(tb testing.TB)) []string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(r)
	}()
	<-done
	r.mu.Lock()
	cleanups := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for _, c := range slices.Backward(cleanups) {
		c()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.failures)
}
