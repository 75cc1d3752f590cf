package faq_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/pgdcb/pgdcb"
	gs "github.com/pgdcb/pgdcb/examples/faq"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/pgdcbtest"
)

func TestSubscribe(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil) // a fresh schema, dropped after the test
	ctx := t.Context()

	if err := gs.DefineCourse(ctx, store, "c1", 1); err != nil {
		t.Fatal(err)
	}
	if err := gs.Subscribe(ctx, store, "c1", "ann"); err != nil {
		t.Fatal(err)
	}
	if err := gs.Subscribe(ctx, store, "c1", "bob"); !errors.Is(err, gs.ErrCourseFull) {
		t.Fatalf("bob: got %v, want ErrCourseFull", err)
	}
	pgdcbtest.RequireEvents(t, pgdcbtest.ReadAll(t, store), []pgdcb.Event{
		gs.CourseDefined("c1", 1),
		gs.StudentSubscribed("c1", "ann"),
	})
}

// Ten students race for three seats: exactly three get one.
func TestLastSeats(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil)
	ctx := t.Context()
	if err := gs.DefineCourse(ctx, store, "c1", 3); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() { errs[i] = gs.Subscribe(ctx, store, "c1", fmt.Sprint("s", i)) })
	}
	wg.Wait()
	var ok, full int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, gs.ErrCourseFull):
			full++
		default:
			t.Fatal(err)
		}
	}
	if ok != 3 || full != 7 {
		t.Fatalf("%d subscribed, %d refused; want 3 and 7", ok, full)
	}
}

// Subscribe takes a pgdcb.Store: the same race on the in-memory
// store, as the guide says.
func TestLastSeatsOnMemstore(t *testing.T) {
	t.Parallel()
	store := memstore.MustNew(nil)
	ctx := t.Context()
	if err := gs.DefineCourse(ctx, store, "c1", 2); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { errs[i] = gs.Subscribe(ctx, store, "c1", fmt.Sprint("s", i)) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !errors.Is(err, gs.ErrCourseFull) {
			t.Fatal(err)
		}
	}
	if ok != 2 {
		t.Fatalf("%d subscribed; want 2", ok)
	}
}
