package await_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdcb/pgdcb/internal/testing/await"
)

func TestWithinHolds(t *testing.T) {
	var n atomic.Int64
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	ok, seen := await.Within(time.Minute, func() (bool, string) {
		v := n.Load()
		return v == 5, fmt.Sprintf("n=%d", v)
	})
	if !ok || seen != "n=5" {
		t.Fatalf("Within = %v, %q; want true, n=5", ok, seen)
	}
}

func TestWithinReportsLastSeen(t *testing.T) {
	calls := 0
	ok, seen := await.Within(20*time.Millisecond, func() (bool, string) {
		calls++
		return false, fmt.Sprintf("call %d", calls)
	})
	if ok {
		t.Fatal("Within held a condition that never holds")
	}
	if calls < 2 || seen != fmt.Sprintf("call %d", calls) {
		t.Fatalf("Within saw %q after %d calls; want the last call's report, and more than one call", seen, calls)
	}
}

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestUntilFailsWithLastSeen(t *testing.T) {
	f := &fatalTB{TB: t}
	await.Until(f, 10*time.Millisecond, func() (bool, string) { return false, "3 of 10 rows" })
	if !strings.Contains(f.msg, "last seen: 3 of 10 rows") {
		t.Fatalf("Until failed with %q; want the last report in it", f.msg)
	}
}
