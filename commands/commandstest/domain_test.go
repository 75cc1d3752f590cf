package commandstest_test

import (
	"context"
	"errors"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/query"
)

// A small domain for the tests and examples: students subscribe to courses
// of limited capacity, once each (the DCB course example).

var (
	errCourseFull        = errors.New("course is full")
	errAlreadySubscribed = errors.New("student already subscribed")
)

func courseDefined(course string, capacity int) pgdcb.Event {
	return pgdcb.MustEvent("CourseDefined", map[string]int{"capacity": capacity}, "course="+course)
}

func subscribed(course, student string) pgdcb.Event {
	return pgdcb.MustEvent("StudentSubscribed", map[string]string{"course": course, "student": student},
		"course="+course, "student="+student)
}

// subscribe is the command: its handler decides on the course's capacity
// and subscriptions and on the student's, in one read.
func subscribe(course, student string) commands.Command {
	return commands.Command{Type: "Subscribe", Handler: commands.HandlerFunc(
		func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
			type state struct{ capacity, taken int }
			c := pgdcb.NewModel(query.Tagged([]string{"CourseDefined", "StudentSubscribed"}, "course="+course), state{},
				func(s state, ev pgdcb.StoredEvent) state {
					if ev.Type == "CourseDefined" {
						s.capacity = 2 // parsed from data in a real handler; the tests define 2 seats
						return s
					}
					s.taken++
					return s
				})
			dup := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, "course="+course, "student="+student), false,
				func(bool, pgdcb.StoredEvent) bool { return true })
			cond, err := dc.Project(ctx, c, dup)
			switch {
			case err != nil:
				return nil, cond, err
			case dup.State:
				return nil, cond, errAlreadySubscribed
			case c.State.taken >= c.State.capacity:
				return nil, cond, errCourseFull
			}
			return []pgdcb.Event{subscribed(course, student)}, cond, nil
		})}
}
