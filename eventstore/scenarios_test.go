package eventstore_test

// The example scenarios of dcb.events, on the real store.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// Gapless invoice numbers: each new invoice reads the last InvoiceCreated and
// appends number+1 on condition that no newer invoice appeared. 8 writers, 6
// invoices each, retrying on conflict: numbers are exactly 1..48.
func TestScenarioGaplessInvoiceNumbers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	q := query.New(query.Item{Types: []string{"InvoiceCreated"}})
	type invoice struct {
		Number int `json:"number"`
	}
	create := func() error {
		for {
			last, cur, err := s.ReadLast(ctx, q)
			if err != nil {
				return err
			}
			next := 1
			if last != nil {
				var inv invoice
				if err := json.Unmarshal(last.Data, &inv); err != nil {
					return err
				}
				next = inv.Number + 1
			}
			_, err = s.AppendIf(ctx, []pgdcb.Event{
				pgdcb.MustEvent("InvoiceCreated", invoice{next}, fmt.Sprintf("invoice=%d", next)),
			}, appendif.FailIf(q, &cur))
			if !errors.Is(err, pgdcb.ErrConditionFailed) {
				return err
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 6 {
				errs <- create()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	evs, _, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	var nums []int
	for _, e := range evs {
		var inv invoice
		require.NoError(t, json.Unmarshal(e.Data, &inv))
		nums = append(nums, inv.Number)
	}
	want := make([]int, 48)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, nums, "numbers are gapless, unique and in log order")
}

// Course subscriptions with a capacity change and a per-student limit.
func TestScenarioCourseSubscriptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	type courseState struct {
		exists         bool
		capacity, subs int
	}
	subscribe := func(course, student string) error {
		ct, st := "course="+course, "student="+student
		cm := pgdcb.NewModel(query.Tagged([]string{"CourseDefined", "CourseCapacityChanged", "StudentSubscribed"}, ct), courseState{},
			func(c courseState, e pgdcb.StoredEvent) courseState {
				switch e.Type {
				case "CourseDefined", "CourseCapacityChanged":
					c.exists = true
					require.NoError(t, json.Unmarshal(e.Data, &c.capacity))
				case "StudentSubscribed":
					c.subs++
				}
				return c
			})
		sm := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, st), 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
		cond, err := s.Project(ctx, cm, sm)
		if err != nil {
			return err
		}
		switch {
		case !cm.State.exists:
			return errors.New("no such course")
		case cm.State.subs >= cm.State.capacity:
			return errors.New("course full")
		case sm.State >= 2:
			return errors.New("student limit")
		}
		_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", nil, ct, st)}, cond)
		return err
	}
	require.EqualError(t, subscribe("c1", "s1"), "no such course")
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("CourseDefined", 1, "course=c1"), pgdcb.MustEvent("CourseDefined", 5, "course=c2"), pgdcb.MustEvent("CourseDefined", 5, "course=c3")})
	require.NoError(t, err)
	require.NoError(t, subscribe("c1", "s1"))
	require.EqualError(t, subscribe("c1", "s2"), "course full")
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("CourseCapacityChanged", 2, "course=c1")})
	require.NoError(t, err)
	require.NoError(t, subscribe("c1", "s2"))
	require.NoError(t, subscribe("c2", "s1"))
	require.EqualError(t, subscribe("c3", "s1"), "student limit")
}

// Opt-in token: a sign-up is confirmed once, with the token it was sent;
// concurrent confirmations of one token commit exactly once.
func TestScenarioOptInToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("SignUpInitiated", map[string]string{"email": "a@example.com"}, "otp=123456", "email=a@example.com")})
	require.NoError(t, err)
	confirm := func(token string) error {
		q := query.Tagged([]string{"SignUpInitiated", "SignUpConfirmed"}, "otp="+token)
		evs, cur, err := s.ReadAll(ctx, q, nil)
		if err != nil {
			return err
		}
		initiated := slices.ContainsFunc(evs, func(e pgdcb.StoredEvent) bool { return e.Type == "SignUpInitiated" })
		confirmed := slices.ContainsFunc(evs, func(e pgdcb.StoredEvent) bool { return e.Type == "SignUpConfirmed" })
		if !initiated {
			return errors.New("unknown token")
		}
		if confirmed {
			return errors.New("already confirmed")
		}
		_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("SignUpConfirmed", nil, "otp="+token, "email=a@example.com")}, appendif.FailIf(q, &cur))
		return err
	}
	require.EqualError(t, confirm("999999"), "unknown token")
	errs := race(8, func(int) func() error { return func() error { return confirm("123456") } })
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !errors.Is(err, pgdcb.ErrConditionFailed) {
			require.EqualError(t, err, "already confirmed")
		}
	}
	require.Equal(t, 1, ok)
	require.EqualError(t, confirm("123456"), "already confirmed")
	require.Equal(t, 1, countEvents(t, s, query.Tagged([]string{"SignUpConfirmed"}, "otp=123456")))
}

// Idempotency token: a client retries "place order" with the same token; the
// retry is recognised as already applied, not as a conflict.
func TestScenarioIdempotencyToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	q := query.Tagged([]string{"OrderPlaced"}, "customer=c1")
	place := func(token, order string, cur cursor.Cursor) error {
		_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("OrderPlaced", order, "customer=c1", "order="+order, "idempotency="+token)},
			appendif.FailIf(q, &cur).WithIdempotency(query.Tagged([]string{"OrderPlaced"}, "idempotency="+token)))
		return err
	}
	_, cur, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.NoError(t, place("tok1", "o1", cur))
	// The retry carries the same (now stale) decision: its own first attempt
	// matches the condition, but it must read as "already applied".
	err = place("tok1", "o1", cur)
	require.ErrorIs(t, err, pgdcb.ErrIdempotent)
	require.NotErrorIs(t, err, pgdcb.ErrConditionFailed)
	var ie *appendif.IdempotentError
	require.ErrorAs(t, err, &ie)
	require.Positive(t, ie.ExistingPosition)
	require.ErrorIs(t, place("tok2", "o2", cur), pgdcb.ErrConditionFailed, "a new order on the stale decision conflicts")
	_, cur, err = s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.NoError(t, place("tok2", "o2", cur))
	require.Equal(t, 2, countEvents(t, s, query.All()))
}
