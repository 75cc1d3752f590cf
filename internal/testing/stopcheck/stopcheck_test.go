package stopcheck

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgdcb/pgdcb/internal/testing/await"
)

const self = "github.com/pgdcb/pgdcb/internal/testing/stopcheck"

// A goroutine that a run started and left running is found (even started
// by a goroutine of the run's), with its stack; once it has ended it is not.
func TestLeftFindsWhatRunLeft(t *testing.T) {
	stop := make(chan struct{})
	started := make(chan struct{})
	r := Go(context.Background(), func(context.Context) error {
		go func() { // started by a goroutine the run started
			go func() {
				close(started)
				<-stop
			}()
		}()
		<-started
		return nil
	})
	<-r.Done()
	if left := r.Left(self); len(left) != 1 {
		t.Fatalf("want the leaked goroutine, got %q", left)
	}
	if left := r.Left("github.com/pgdcb/pgdcb/projection"); len(left) != 0 {
		t.Fatalf("another package's code: want nothing, got %q", left)
	}
	close(stop)
	await.Until(t, 30*time.Second, func() (bool, string) {
		left := r.Left(self)
		return len(left) == 0, fmt.Sprintf("the ended goroutine still reported: %q", left)
	})
	// Another run's goroutines are not this one's.
	other := Go(context.Background(), func(context.Context) error { return nil })
	<-other.Done()
	if left := other.Left(self); len(left) != 0 {
		t.Fatalf("a clean run: want nothing, got %q", left)
	}
}
