package gettingstarted_test

import (
	"context"
	"errors"
	"testing"

	gs "github.com/pgdcb/pgdcb/examples/gettingstarted"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbtest"
)

func TestDefineCourseOnce(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil)
	if err := gs.DefineCourse(t.Context(), store, "c1", 3); err != nil {
		t.Fatal(err)
	}
	if err := gs.DefineCourse(t.Context(), store, "c1", 5); !errors.Is(err, gs.ErrCourseExists) {
		t.Fatalf("second definition: got %v, want ErrCourseExists", err)
	}
	if err := gs.Subscribe(t.Context(), store, "c9", "ann"); !errors.Is(err, gs.ErrNoSuchCourse) {
		t.Fatalf("subscribe to c9: got %v, want ErrNoSuchCourse", err)
	}
}

// Open migrates a schema of its own and returns a working store.
func TestOpen(t *testing.T) {
	t.Parallel()
	store, pool, err := gs.Open(t.Context(), pgtest.DSN(t), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(context.Background()); err != nil { // the store first: it writes through the pool
			t.Error(err)
		}
		pool.Close()
	})
	if err := gs.DefineCourse(t.Context(), store, "c1", 1); err != nil {
		t.Fatal(err)
	}
	if err := gs.Subscribe(t.Context(), store, "c1", "ann"); err != nil {
		t.Fatal(err)
	}
	if err := gs.Subscribe(t.Context(), store, "c1", "ann"); !errors.Is(err, gs.ErrAlreadySubscribed) {
		t.Fatalf("second subscription: got %v, want ErrAlreadySubscribed", err)
	}
}
