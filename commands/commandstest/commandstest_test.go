package commandstest_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/commands/commandstest"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/memstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Each scenario on both stores.
func bothStores(t *testing.T, f func(t *testing.T, opts *commandstest.Options)) {
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) { f(t, &commandstest.Options{Postgres: pg}) })
	}
}

func TestScenarios(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, opts *commandstest.Options) {
		out := commandstest.New(t, opts).Given(courseDefined("c1", 2), subscribed("c1", "s1")).
			When(subscribe("c1", "s2")).
			Then(subscribed("c1", "s2"))
		require.Len(t, out.Events, 1)
		require.False(t, out.Duplicate)

		commandstest.New(t, opts).Given(courseDefined("c1", 2), subscribed("c1", "s1"), subscribed("c1", "s2")).
			When(subscribe("c1", "s3")).
			ThenError(errCourseFull)

		commandstest.New(t, opts).Given(courseDefined("c1", 2)).Given(subscribed("c1", "s1")).
			When(subscribe("c1", "s1")).
			ThenError(errAlreadySubscribed)

		// Another course's subscriptions do not count.
		commandstest.New(t, opts).Given(courseDefined("c1", 2), courseDefined("c2", 2), subscribed("c2", "s1"), subscribed("c2", "s2")).
			When(subscribe("c1", "s3")).
			Then(subscribed("c1", "s3"))
	})
}

// The same command id again appends nothing: Then() with no events.
func TestScenarioDuplicate(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, opts *commandstest.Options) {
		fx := commandstest.New(t, opts)
		c := subscribe("c1", "s1")
		c.ID = uuid.New()
		fx.Given(courseDefined("c1", 2)).When(c).Then(subscribed("c1", "s1"))
		out := fx.Given().When(c).Then()
		require.True(t, out.Duplicate)
	})
}

func TestStoreSwitch(t *testing.T) {
	require.IsType(t, &memstore.Store{}, commandstest.New(t, nil).Store())
	require.IsType(t, &eventstore.Store{}, commandstest.New(t, &commandstest.Options{Postgres: true}).Store())
	t.Setenv("PGDCB_FIXTURE_STORE", "postgres")
	require.IsType(t, &eventstore.Store{}, commandstest.New(t, nil).Store())
	t.Setenv("PGDCB_FIXTURE_STORE", "memory")
	require.IsType(t, &memstore.Store{}, commandstest.New(t, nil).Store())
	t.Setenv("PGDCB_FIXTURE_STORE", "mysql")
	failures := (&pgtest.Recorder{TB: t}).Run(func(tb testing.TB) { commandstest.New(tb, nil) })
	require.Equal(t, []string{`commandstest: PGDCB_FIXTURE_STORE="mysql": want postgres, memory or nothing`}, failures)
}

func TestRegisteredHandlers(t *testing.T) {
	t.Parallel()
	fx := commandstest.New(t, &commandstest.Options{Handlers: map[string]commands.Handler{"Subscribe": subscribe("c1", "s1").Handler}})
	fx.Given(courseDefined("c1", 2)).When(commands.Command{Type: "Subscribe"}).Then(subscribed("c1", "s1"))
}

// The fixture fails a test for the right reasons, with a message saying
// what differs.
func TestScenarioFailures(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		run  func(tb testing.TB)
		want string
	}{
		"other events": {func(tb testing.TB) {
			commandstest.Given(tb, courseDefined("c1", 2)).When(subscribe("c1", "s1")).Then(subscribed("c1", "s2"))
		}, "commandstest: the command appended other events than expected: events differ:\n  event 0: StudentSubscribed: tags [course=c1 student=s1], want [course=c1 student=s2]"},
		"no events expected": {func(tb testing.TB) {
			commandstest.Given(tb, courseDefined("c1", 2)).When(subscribe("c1", "s1")).Then()
		}, "event 0: unexpected StudentSubscribed [course=c1 student=s1]"},
		"an error instead": {func(tb testing.TB) {
			commandstest.Given(tb).When(subscribe("c1", "s1")).Then(subscribed("c1", "s1"))
		}, "commandstest: When failed: pgdcb: commands: Subscribe rejected: course is full"},
		"success instead of an error": {func(tb testing.TB) {
			commandstest.Given(tb, courseDefined("c1", 2)).When(subscribe("c1", "s1")).ThenError(errCourseFull)
		}, "commandstest: When succeeded (1 events), want an error matching course is full"},
		"another error": {func(tb testing.TB) {
			commandstest.Given(tb).When(subscribe("c1", "s1")).ThenError(errAlreadySubscribed)
		}, "commandstest: When failed with pgdcb: commands: Subscribe rejected: course is full, want an error matching student already subscribed"},
		"an error that appended": {func(tb testing.TB) {
			fx := commandstest.New(tb, nil)
			fx.Given().WhenFunc(func(ctx context.Context) (commands.Outcome, error) {
				if _, err := fx.Store().Append(ctx, []pgdcb.Event{subscribed("c1", "s1")}); err != nil {
					return commands.Outcome{}, err
				}
				return commands.Outcome{}, errCourseFull
			}).ThenError(errCourseFull)
		}, "commandstest: When failed (course is full) but appended 1 events"},
		"Then before When": {func(tb testing.TB) { commandstest.Given(tb).Then() }, "commandstest: Then before When"},
		"When twice": {func(tb testing.TB) {
			commandstest.Given(tb).When(subscribe("c1", "s1")).When(subscribe("c1", "s1"))
		}, "commandstest: When twice in one scenario"},
	} {
		t.Run(name, func(t *testing.T) {
			failures := (&pgtest.Recorder{TB: t}).Run(tc.run)
			require.Len(t, failures, 1)
			require.Contains(t, failures[0], tc.want)
		})
	}
}

// A handler test on the in-memory store against the same on PostgreSQL:
// fixture, Given (two events), When, Then.
func BenchmarkScenario(b *testing.B) {
	for _, pg := range []bool{false, true} {
		b.Run(map[bool]string{false: "memory", true: "postgres"}[pg], func(b *testing.B) {
			if pg {
				commandstest.New(b, &commandstest.Options{Postgres: true}) // start pgdcbtest's workers outside the measure
			}
			for b.Loop() {
				(&pgtest.Recorder{TB: b}).Run(func(tb testing.TB) {
					commandstest.New(tb, &commandstest.Options{Postgres: pg}).
						Given(courseDefined("c1", 2), subscribed("c1", "s1")).
						When(subscribe("c1", "s2")).
						Then(subscribed("c1", "s2"))
				})
			}
		})
	}
}
