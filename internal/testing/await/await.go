// Package await is how pgdcb's tests wait: for a condition they can observe
// (a row count, a checkpoint, a backend waiting on a lock), polled until it
// holds or a deadline passes, and a failure that says what was last seen.
// A test never sleeps in the hope that something has happened.
//
//	await.Until(t, time.Minute, func() (bool, string) {
//		n := count(t)
//		return n == 10, fmt.Sprintf("%d of 10 rows", n)
//	})
package await

import (
	"testing"
	"time"
)

// maxPoll bounds the pause between two polls: polls start at once and back
// off to it.
const maxPoll = 10 * time.Millisecond

// Within polls cond until it holds or timeout has passed; it returns whether
// it held and what cond saw last. It never touches a testing.TB: use it off
// the test's goroutine, or where not holding is not a failure.
func Within(timeout time.Duration, cond func() (ok bool, seen string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond / 4
	for {
		ok, seen := cond()
		if ok {
			return true, seen
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, seen
		}
		pause = min(2*pause, maxPoll, left)
		<-time.After(pause)
	}
}

// Until polls cond until it holds; when it has not held after timeout (or a
// second before the test's own deadline, when that is sooner) it fails tb
// (Fatalf) with what cond saw last. cond runs on the caller's goroutine and
// may fail tb itself.
func Until(tb testing.TB, timeout time.Duration, cond func() (ok bool, seen string)) {
	tb.Helper()
	if d, ok := testDeadline(tb); ok {
		timeout = min(timeout, max(time.Until(d)-time.Second, 0))
	}
	if ok, seen := Within(timeout, cond); !ok {
		tb.Fatalf("await: not within %s; last seen: %s", timeout, seen)
	}
}

// True is Until for a condition with nothing to report but false; what
// names it in the failure.
func True(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	Until(tb, timeout, func() (bool, string) { return cond(), what + ": false" })
}

func testDeadline(tb testing.TB) (time.Time, bool) {
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		return t.Deadline()
	}
	return time.Time{}, false
}
