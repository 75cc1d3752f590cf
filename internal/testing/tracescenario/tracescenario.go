// Package tracescenario runs, on a real PostgreSQL, the store calls the
// tests of the tracer adapters (pgdcbprom, pgdcbotel) observe: one scenario
// for both, with the counts it must produce.
package tracescenario

import (
	"context"
	"errors"
	"testing"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
)

// What Run does, in order:
//
//  1. Append of 2 events: committed.
//  2. Project of the course's events: 2 events read.
//  3. Append of 1 event: committed.
//  4. AppendIf on step 2's condition: condition_failed.
//  5. AppendIf whose idempotency query matches step 1's events: idempotent.
//  6. Append of an event without a type: invalid (nothing sent).
//  7. ReadAll of the course's events: 3 events read.
const (
	Committed       = 2 // appends committed
	EventsAppended  = 3 // their events
	ConditionFailed = 1
	Idempotent      = 1
	Invalid         = 1
	Appends         = Committed + ConditionFailed + Idempotent + Invalid
	ProjectEvents   = 2 // events read by the one Project
	ReadEvents      = 3 // events read by the one ReadAll
	CheckItems      = 3 // query items of the decided AppendIfs' checks: 1 (step 4) + 2 (step 5)
)

// Store returns a store on the test server in a fresh schema (dropped when
// the test ends), traced by tracer.
func Store(t testing.TB, tracer eventstore.Tracer) *eventstore.Store {
	t.Helper()
	s, _ := teststore.New(t, &eventstore.Config{Tracer: tracer})
	return s
}

// Run runs the scenario on s and fails the test unless each call returns
// what the scenario expects.
func Run(t testing.TB, s *eventstore.Store) {
	t.Helper()
	ctx := context.Background()
	course := query.Tagged(nil, "course=c1")
	check := func(step string, err, want error) {
		t.Helper()
		if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
			t.Fatalf("tracescenario: %s: got %v, want %v", step, err, want)
		}
	}
	_, err := s.Append(ctx, []pgdcb.Event{
		pgdcb.MustEvent("Opened", nil, "course=c1"),
		pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=s1"),
	})
	check("append", err, nil)
	seats := pgdcb.NewModel(course, 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
	cond, err := s.Project(ctx, seats)
	check("project", err, nil)
	if seats.State != ProjectEvents {
		t.Fatalf("tracescenario: project folded %d events, want %d", seats.State, ProjectEvents)
	}
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=s2")})
	check("second append", err, nil)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=s3")}, cond)
	check("stale AppendIf", err, pgdcb.ErrConditionFailed)
	head, err := s.Head(ctx)
	check("head", err, nil)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Subscribed", nil, "course=c1", "student=s1")},
		appendif.FailIf(course, &head).WithIdempotency(query.Tagged([]string{"Subscribed"}, "student=s1")))
	check("repeated AppendIf", err, pgdcb.ErrIdempotent)
	_, err = s.Append(ctx, []pgdcb.Event{{Data: []byte(`{}`)}})
	check("invalid append", err, pgdcb.ErrInvalidEvent)
	evs, _, err := s.ReadAll(ctx, course, nil)
	check("read", err, nil)
	if len(evs) != ReadEvents {
		t.Fatalf("tracescenario: read %d events, want %d", len(evs), ReadEvents)
	}
}
