package commandstest_test

import (
	"fmt"
	"testing"

	"github.com/pgdcb/pgdcb/commands/commandstest"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

// A command handler's tests as given-when-then scenarios, on the in-memory
// store (PGDCB_FIXTURE_STORE=postgres runs them on PostgreSQL). subscribe
// is the command under test: a student takes a seat of a course unless the
// course is full or the student has one. (In a real test, t is the
// *testing.T; a pgtest.Recorder stands in for it so that the example runs
// and shows a failure's message.)
func Example() {
	failures := (&pgtest.Recorder{}).Run(func(t testing.TB) {
		commandstest.Given(t, courseDefined("c1", 2), subscribed("c1", "s1")).
			When(subscribe("c1", "s2")).
			Then(subscribed("c1", "s2"))

		commandstest.Given(t, courseDefined("c1", 2), subscribed("c1", "s1"), subscribed("c1", "s2")).
			When(subscribe("c1", "s3")).
			ThenError(errCourseFull)

		// A wrong expectation fails the test, saying what differs.
		commandstest.Given(t, courseDefined("c1", 2)).
			When(subscribe("c1", "s1")).
			Then(subscribed("c1", "s9"))
	})
	fmt.Println(failures[0])
	// Output:
	// commandstest: the command appended other events than expected: events differ:
	//   event 0: StudentSubscribed: tags [course=c1 student=s1], want [course=c1 student=s9]
	// got:
	//   StudentSubscribed [course=c1 student=s1] {"course": "c1", "student": "s1"}
	// want:
	//   StudentSubscribed [course=c1 student=s9] {"course":"c1","student":"s9"}
}
