package gettingstarted_test

import (
	"testing"

	gs "github.com/pgdcb/pgdcb/examples/gettingstarted"
	"github.com/pgdcb/pgdcb/pgdcbtest"
)

func TestCourseSizes(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, nil)
	ctx := t.Context()
	for _, c := range []string{"c1", "c2"} {
		if err := gs.DefineCourse(ctx, store, c, 10); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct{ course, student string }{{"c1", "ann"}, {"c1", "bob"}, {"c2", "ann"}} {
		if err := gs.Subscribe(ctx, store, s.course, s.student); err != nil {
			t.Fatal(err)
		}
	}
	head, err := store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	sizes, err := gs.CourseSizes(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sizes.Run(ctx) }()
	pgdcbtest.WaitForProjection(t, sizes, head) // the read model has seen every event

	rows, err := store.Pool().Query(ctx, `SELECT course, students FROM `+store.Schema()+`.course_sizes ORDER BY course`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var c string
		var n int
		if err := rows.Scan(&c, &n); err != nil {
			t.Fatal(err)
		}
		got[c] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["c1"] != 2 || got["c2"] != 1 {
		t.Fatalf("course_sizes = %v, want c1:2 c2:1", got)
	}
}
