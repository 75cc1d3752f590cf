package faq_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pgdcb/pgdcb"
	gs "github.com/pgdcb/pgdcb/examples/faq"
	"github.com/pgdcb/pgdcb/pgdcbtest"
)

// Eight creators race: the numbers are 1..40, each once.
func TestInvoiceNumbersHaveNoGap(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil)
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 5 {
				n, err := gs.CreateInvoice(t.Context(), store, fmt.Sprint("c", w))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	for i, n := range got {
		if n != i+1 {
			t.Fatalf("numbers %v: want 1..40, each once", got)
		}
	}
	if len(got) != 40 || len(pgdcbtest.ReadAll(t, store)) != 40 {
		t.Fatalf("%d numbers; want 40", len(got))
	}
}

// Four accounts race for one name: exactly one gets it; other names do not
// contend.
func TestUsernameIsUnique(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = gs.Register(t.Context(), store, fmt.Sprint("a", i), " Alice") })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, gs.ErrUsernameTaken):
			t.Fatal(err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d accounts got alice: %v", ok, errs)
	}
	if err := gs.Register(t.Context(), store, "a9", "bob"); err != nil {
		t.Fatal(err)
	}
	if err := gs.Register(t.Context(), store, "a8", "ALICE"); !errors.Is(err, gs.ErrUsernameTaken) {
		t.Fatalf("ALICE: got %v, want ErrUsernameTaken", err)
	}
}

// The two-invariant boundary reads the course's events and the student's
// subscriptions, nothing else.
func TestSubscriptionBoundary(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil)
	for _, c := range []string{"c1", "c2", "c3"} {
		if err := gs.DefineCourse(t.Context(), store, c, 5); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct{ course, student string }{{"c1", "ann"}, {"c2", "ann"}, {"c3", "bob"}, {"c1", "bob"}} {
		if err := gs.Subscribe(t.Context(), store, s.course, s.student); err != nil {
			t.Fatal(err)
		}
	}
	got := pgdcbtest.Select(pgdcbtest.ReadAll(t, store), gs.SubscriptionBoundary("c1", "ann"))
	pgdcbtest.RequireEvents(t, got, []pgdcb.Event{
		gs.CourseDefined("c1", 5),
		gs.StudentSubscribed("c1", "ann"),
		gs.StudentSubscribed("c2", "ann"),
		gs.StudentSubscribed("c1", "bob"),
	})
}
