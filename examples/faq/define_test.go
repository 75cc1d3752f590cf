package faq_test

import (
	"errors"
	"testing"

	gs "github.com/pgdcb/pgdcb/examples/faq"
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
