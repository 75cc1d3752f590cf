package faq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// The events. Tags say what an event is about: the decisions that must see it
// query by them.
func CourseDefined(course string, capacity int) pgdcb.Event {
	return pgdcb.MustEvent("CourseDefined", map[string]int{"capacity": capacity}, "course="+course)
}

func StudentSubscribed(course, student string) pgdcb.Event {
	return pgdcb.MustEvent("StudentSubscribed", map[string]string{},
		"course="+course, "student="+student)
}

// DefineCourse defines a course once: the condition fails if the course was
// already defined, whoever defined it and however concurrently.
func DefineCourse(ctx context.Context, store pgdcb.Store, course string, capacity int) error {
	defined := query.Tagged([]string{"CourseDefined"}, "course="+course)
	_, err := store.AppendIf(ctx, []pgdcb.Event{CourseDefined(course, capacity)},
		appendif.FailIf(defined, nil)) // nil cursor: fail if any such event exists
	if errors.Is(err, pgdcb.ErrConditionFailed) {
		return ErrCourseExists
	}
	return err
}

var (
	ErrCourseExists      = errors.New("course already defined")
	ErrNoSuchCourse      = errors.New("no such course")
	ErrCourseFull        = errors.New("course is full")
	ErrAlreadySubscribed = errors.New("already subscribed")
)

// courseState is what the decision needs to know, folded from the events
// tagged with the course.
type courseState struct {
	Defined    bool
	Capacity   int
	Students   int
	Subscribed bool // the student asking is among them
}

// Subscribe subscribes a student to a course unless it is full. The decision
// reads the course's events, and AppendIf commits only if none of them
// changed meanwhile: two students racing for the last seat cannot both get it.
func Subscribe(ctx context.Context, store pgdcb.Store, course, student string) error {
	for {
		state := pgdcb.NewModel(query.Tagged(nil, "course="+course), courseState{},
			func(s courseState, ev pgdcb.StoredEvent) courseState {
				switch ev.Type {
				case "CourseDefined":
					var d struct{ Capacity int }
					_ = json.Unmarshal(ev.Data, &d)
					s.Defined, s.Capacity = true, d.Capacity
				case "StudentSubscribed":
					s.Students++
					if who, _ := ev.Tags.Get("student"); who == student {
						s.Subscribed = true
					}
				}
				return s
			})
		cond, err := store.Project(ctx, state) // one read, one snapshot
		if err != nil {
			return err
		}
		switch s := state.State; {
		case !s.Defined:
			return ErrNoSuchCourse
		case s.Subscribed:
			return ErrAlreadySubscribed
		case s.Students >= s.Capacity:
			return ErrCourseFull
		}
		_, err = store.AppendIf(ctx, []pgdcb.Event{StudentSubscribed(course, student)}, cond)
		if errors.Is(err, pgdcb.ErrConditionFailed) {
			continue // someone else decided first: read again, decide again
		}
		if err != nil {
			return fmt.Errorf("subscribe %s to %s: %w", student, course, err)
		}
		return nil
	}
}

// SubscriptionBoundary is the query of a decision enforcing two invariants at
// once: the course's capacity and a limit on the student's courses.
func SubscriptionBoundary(course, student string) query.Query {
	return query.New(
		// The course: its definition (capacity) and its subscriptions.
		query.Item{Tags: tags.MustParseSet("course=" + course)},
		// The student's subscriptions, to any course.
		query.Item{Types: []string{"StudentSubscribed"}, Tags: tags.MustParseSet("student=" + student)},
	)
}
