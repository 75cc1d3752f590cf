// Package stopcheck checks that a component's Run(ctx) stops cleanly: once it
// has returned, no goroutine it started (directly or not) still runs code of
// the given packages. Tests of the projection runner, the outbox relay and
// the effects worker use it.
//
// Run is called in a goroutine carrying a pprof label unique to the call;
// goroutines inherit their creator's labels, so the goroutine profile tells
// which goroutines descend from that Run, whoever started them. Goroutines
// of other code they started (a pool creating a connection) are not the
// component's and are not counted unless their stacks run its packages'
// code.
package stopcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdcb/pgdcb/internal/testing/await"
)

var seq atomic.Int64

// Run is a call of run(ctx) in a goroutine of its own, labelled.
type Run struct {
	label string
	done  chan struct{}
	err   error
}

// Go starts run(ctx) in a labelled goroutine.
func Go(ctx context.Context, run func(context.Context) error) *Run {
	r := &Run{label: fmt.Sprintf("stopcheck-%d", seq.Add(1)), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		pprof.Do(ctx, pprof.Labels("stopcheck", r.label), func(ctx context.Context) {
			r.err = run(ctx)
		})
	}()
	return r
}

// Done is closed when run has returned.
func (r *Run) Done() <-chan struct{} { return r.done }

// Err is run's error (after Done).
func (r *Run) Err() error { return r.err }

// Left returns the stacks (function names, innermost first) of the
// goroutines descending from the run that still run code of a package
// whose import path is one of pkgs ("github.com/pgdcb/pgdcb/projection"
// matches that package's functions and methods, not projection_test's).
func (r *Run) Left(pkgs ...string) []string {
	left, _ := r.left(pkgs)
	return left
}

// left is Left; parked says whether one of them is parked (blocked: in a
// channel operation, a select, a lock, network I/O, a sleep), not on its way
// out.
func (r *Run) left(pkgs []string) (left []string, parked bool) {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return []string{"goroutine profile: " + err.Error()}, true
	}
	want := `"stopcheck":"` + r.label + `"`
	for _, block := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(block, want) {
			continue
		}
		var funcs []string
		match := false
		for _, line := range strings.Split(block, "\n") {
			f := strings.Fields(strings.TrimPrefix(line, "#"))
			if !strings.HasPrefix(line, "#\t") || len(f) < 2 {
				continue
			}
			fn := f[1]
			if i := strings.LastIndex(fn, "+0x"); i > 0 {
				fn = fn[:i]
			}
			funcs = append(funcs, fn)
			for _, p := range pkgs {
				if strings.HasPrefix(fn, p+".") {
					match = true
				}
			}
		}
		if match {
			left = append(left, strings.Join(funcs, " < "))
			parked = parked || !exiting(funcs[0], pkgs)
		}
	}
	return left, parked
}

// Gone returns the goroutines Left lists, at once if one of them is parked
// (it waits for something: a leak), else once none is left or grace has
// passed (a goroutine that has signalled its end, as a WaitGroup's Done,
// is listed until it has returned: microseconds, longer on a loaded
// machine).
func (r *Run) Gone(grace time.Duration, pkgs ...string) []string {
	var left []string
	await.Within(grace, func() (bool, string) {
		var parked bool
		left, parked = r.left(pkgs)
		return len(left) == 0 || parked, ""
	})
	return left
}

// Grace is the time Stop gives goroutines that have signalled their end to
// return.
const Grace = 2 * time.Second

// Stop checks the stop rule of a component: run (its Run) is started in a
// labelled goroutine; once entered yields (a handler of the component is
// running, and returns only when its context ends), ctx is cancelled; Run
// must return ctx's error within timeout, no handler may be running then
// (busy() == 0), and no goroutine descending from the run may still run
// code of pkgs. It returns the run.
func Stop(t testing.TB, run func(context.Context) error, entered <-chan struct{}, busy func() int64, timeout time.Duration, pkgs ...string) *Run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := Go(ctx, run)
	select {
	case <-entered:
	case <-r.Done():
		t.Fatalf("Run returned before a handler ran: %v", r.Err())
	case <-time.After(timeout):
		t.Fatal("no handler ran")
	}
	cancel()
	select {
	case <-r.Done():
	case <-time.After(timeout):
		t.Fatalf("Run did not return within %s of its context's end", timeout)
	}
	if n := busy(); n != 0 {
		t.Errorf("%d handlers still running after Run returned", n)
	}
	if !errors.Is(r.Err(), context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", r.Err())
	}
	if left := r.Gone(Grace, pkgs...); len(left) > 0 {
		t.Errorf("goroutines started by Run still running after it returned:\n%s", strings.Join(left, "\n"))
	}
	return r
}

// exiting says whether a goroutine whose innermost frame is top may be on
// its way out rather than waiting: top is the goroutine's own code, a
// WaitGroup's Done, or the runtime's goexit. (The goroutine profile does
// not show runtime.gopark: a blocked goroutine's innermost frame is where
// it blocks, as internal/poll.runtime_pollWait or runtime.selectgo.)
func exiting(top string, pkgs []string) bool {
	if strings.HasPrefix(top, "sync.(*WaitGroup).") || strings.HasPrefix(top, "runtime.goexit") {
		return true
	}
	for _, p := range pkgs {
		if strings.HasPrefix(top, p+".") {
			return true
		}
	}
	return false
}
