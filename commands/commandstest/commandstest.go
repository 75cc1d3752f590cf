// Package commandstest tests command handlers of package commands as
// given-when-then scenarios:
//
//	commandstest.Given(t, opened("a"), deposited("a", 100)).
//		When(withdraw("a", 30)).
//		Then(withdrawn("a", 30))
//
//	commandstest.Given(t, opened("a")).
//		When(withdraw("a", 30)).
//		ThenError(ErrInsufficientFunds)
//
// Given appends events to a fresh store, When executes a command through a
// commands.Executor on it, Then checks the events the command appended
// (types, tags, data; the executor's command_id tag is ignored) and
// ThenError the error it failed with (errors.Is: a handler's rejection
// unwraps to the handler's own error) and that it appended nothing.
//
// Scenarios run on the in-memory store (package memstore) by default: no
// server, well under a millisecond each. Options.Postgres, or the
// environment variable PGDCB_FIXTURE_STORE=postgres, runs the same
// scenarios on a fresh PostgreSQL schema (package pgdcbtest) instead, so a
// suite can be checked on both. On memstore the executor keeps Execute's
// semantics except that a command deciding no events is not recorded (see
// commands.New).
//
// The package lives next to commands, as httptest does next to http: it is
// the commands package's test kit, and it keeps pgdcbtest (the store kit)
// free of the commands dependency.
package commandstest

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/pgdcbtest"
)

// storeEnvVar selects the store of every fixture that does not set
// Options.Postgres: "postgres" for PostgreSQL, "memory" or unset for the
// in-memory store. Any other value fails the test.
const storeEnvVar = "PGDCB_FIXTURE_STORE"

// Options configures a Fixture. nil means every default.
type Options struct {
	// Postgres runs the fixture on a fresh, migrated PostgreSQL schema
	// (pgdcbtest.NewStore) instead of the in-memory store. Default false,
	// unless the environment variable PGDCB_FIXTURE_STORE is "postgres".
	Postgres bool
	// Config configures the executor. Default: commands' defaults.
	Config *commands.Config
	// Handlers are registered on the executor, by command type, for
	// commands without a Handler of their own.
	Handlers map[string]commands.Handler
}

// Fixture is a store and an executor on it, for one test.
type Fixture struct {
	tb    testing.TB
	store pgdcb.Store
	exec  *commands.Executor
}

// New returns a fixture on a new store (see Options). It fails the test
// when the store or the executor cannot be had.
func New(tb testing.TB, opts *Options) *Fixture {
	tb.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	pg := o.Postgres
	switch v := os.Getenv(storeEnvVar); v {
	case "postgres":
		pg = true
	case "", "memory":
	default:
		tb.Fatalf("commandstest: %s=%q: want postgres, memory or nothing", storeEnvVar, v)
	}
	var store pgdcb.Store
	if pg {
		store = pgdcbtest.NewStore(tb, nil)
	} else {
		store = memstore.MustNew(nil)
	}
	ex, err := commands.New(store, o.Config)
	if err != nil {
		tb.Fatalf("commandstest: %v", err)
	}
	for typ, h := range o.Handlers {
		if err := ex.Register(typ, h); err != nil {
			tb.Fatalf("commandstest: %v", err)
		}
	}
	return &Fixture{tb: tb, store: store, exec: ex}
}

// Given starts a scenario on a fixture with every default (see New).
func Given(tb testing.TB, events ...pgdcb.Event) *Scenario {
	tb.Helper()
	return New(tb, nil).Given(events...)
}

// Store returns the fixture's store: a *memstore.Store or an
// *eventstore.Store.
func (f *Fixture) Store() pgdcb.Store { return f.store }

// Executor returns the fixture's executor.
func (f *Fixture) Executor() *commands.Executor { return f.exec }

// Given starts a scenario: it appends the events (in one append, when there
// are any) and fails the test if that fails.
func (f *Fixture) Given(events ...pgdcb.Event) *Scenario {
	f.tb.Helper()
	s := &Scenario{f: f}
	return s.Given(events...)
}

// Scenario is one given-when-then: Given (any number of times), When once,
// then Then or ThenError.
type Scenario struct {
	f      *Fixture
	before int // events in the log when When ran
	ran    bool
	out    commands.Outcome
	err    error
}

// Given appends more events.
func (s *Scenario) Given(events ...pgdcb.Event) *Scenario {
	s.f.tb.Helper()
	if s.ran {
		s.f.tb.Fatalf("commandstest: Given after When")
	}
	if len(events) > 0 {
		if _, err := s.f.store.Append(s.f.tb.Context(), events); err != nil {
			s.f.tb.Fatalf("commandstest: Given: appending %d events: %v", len(events), err)
		}
	}
	return s
}

// When executes the command through the fixture's executor.
func (s *Scenario) When(cmd commands.Command) *Scenario {
	s.f.tb.Helper()
	return s.WhenFunc(func(ctx context.Context) (commands.Outcome, error) { return s.f.exec.Execute(ctx, cmd) })
}

// WhenFunc runs the code under test, for code that executes its command
// itself (an application service over the fixture's store).
func (s *Scenario) WhenFunc(run func(ctx context.Context) (commands.Outcome, error)) *Scenario {
	s.f.tb.Helper()
	if s.ran {
		s.f.tb.Fatalf("commandstest: When twice in one scenario")
	}
	s.before = len(s.log())
	s.out, s.err = run(s.f.tb.Context())
	s.ran = true
	return s
}

// Then fails the test unless When succeeded and appended exactly the want
// events (see pgdcbtest.RequireEvents; the command_id tag is ignored). It
// returns the command's outcome.
func (s *Scenario) Then(want ...pgdcb.Event) commands.Outcome {
	s.f.tb.Helper()
	s.mustHaveRun("Then")
	if s.err != nil {
		s.f.tb.Fatalf("commandstest: When failed: %v", s.err)
	}
	if msg := pgdcbtest.DiffEvents(s.appended(), want, commands.CommandIDTagKey); msg != "" {
		s.f.tb.Fatalf("commandstest: the command appended other events than expected: %s", msg)
	}
	return s.out
}

// ThenError fails the test unless When failed with an error matching
// target (errors.Is) and appended nothing. It returns the error.
func (s *Scenario) ThenError(target error) error {
	s.f.tb.Helper()
	s.mustHaveRun("ThenError")
	if s.err == nil {
		s.f.tb.Fatalf("commandstest: When succeeded (%d events), want an error matching %v", len(s.appended()), target)
	}
	if !errors.Is(s.err, target) {
		s.f.tb.Fatalf("commandstest: When failed with %v, want an error matching %v", s.err, target)
	}
	if evs := s.appended(); len(evs) > 0 {
		s.f.tb.Fatalf("commandstest: When failed (%v) but appended %d events: %s", s.err, len(evs),
			pgdcbtest.DiffEvents(evs, nil, commands.CommandIDTagKey))
	}
	return s.err
}

func (s *Scenario) mustHaveRun(what string) {
	s.f.tb.Helper()
	if !s.ran {
		s.f.tb.Fatalf("commandstest: %s before When", what)
	}
}

// log reads the whole log.
func (s *Scenario) log() []pgdcb.StoredEvent {
	s.f.tb.Helper()
	return pgdcbtest.ReadAll(s.f.tb, s.f.store)
}

// appended are the events When appended.
func (s *Scenario) appended() []pgdcb.StoredEvent {
	s.f.tb.Helper()
	evs := s.log()
	if len(evs) < s.before {
		s.f.tb.Fatalf("commandstest: the log shrank from %d to %d events during When", s.before, len(evs))
	}
	return evs[s.before:]
}
