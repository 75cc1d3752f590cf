package conformance

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// An event matching the condition that the decision did not see fails the
// append (typed, nothing written); one it saw does not; without a cursor any
// matching event fails it.
func testConditionUnseen(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	q := query.Tagged([]string{"Claimed"}, "name=alice")
	claim := ev("Claimed", 1, "name=alice")

	// Nothing matches yet: both forms pass.
	_, c0, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	first, err := s.AppendIf(ctx, []pgdcb.Event{claim}, appendif.FailIf(q, nil))
	require.NoError(t, err, "no matching event at all: the append commits")

	// The decision taken before that append did not see it.
	_, err = s.AppendIf(ctx, []pgdcb.Event{claim}, appendif.FailIf(q, &c0))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	var cfe *appendif.ConditionFailedError
	require.ErrorAs(t, err, &cfe)
	require.Equal(t, first.Positions[0], cfe.ConflictPosition)
	require.NotNil(t, cfe.After)
	require.Equal(t, c0, *cfe.After)
	require.Equal(t, q.String(), cfe.Query.String())
	require.Equal(t, 1, count(t, s, q), "a failed condition appends nothing")

	// Without a cursor any matching event fails the append.
	_, err = s.AppendIf(ctx, []pgdcb.Event{claim}, appendif.FailIf(q, nil))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	require.ErrorAs(t, err, &cfe)
	require.Nil(t, cfe.After)

	// A fresh decision saw it: the append commits, and it sees other
	// boundaries' events as no conflict.
	_, c1, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	appendOK(t, s, ev("Claimed", 2, "name=bob"), ev("Renamed", 3, "name=alice"))
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("Released", 1, "name=alice")}, appendif.FailIf(q, &c1))
	require.NoError(t, err, "events outside the query do not conflict")
	// Head works as a decision too.
	h, err := s.Head(ctx)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{claim}, appendif.FailIf(q, &h))
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{claim}, appendif.FailIf(q, &h))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "the event appended after the head is unseen")
	require.Equal(t, 2, count(t, s, q))
}

// Multi-item OR: a condition with two items conflicts with an event that
// matches only the second item, and not with one that matches neither.
func testConditionItemsORed(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	q := query.New(
		query.Item{Types: []string{"A"}, Tags: tags.MustParseSet("x=1")},
		query.Item{Types: []string{"B"}, Tags: tags.MustParseSet("y=1")},
	)
	cur, err := s.Head(ctx)
	require.NoError(t, err)
	appendOK(t, s, ev("A", 1, "y=1"), ev("B", 1, "x=1"), ev("C", 1, "x=1", "y=1"))
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("C", 1, "z=1")}, appendif.FailIf(q, &cur))
	require.NoError(t, err, "an event matching no item must not conflict")

	for _, conflicting := range []pgdcb.Event{ev("B", 1, "y=1", "w=2"), ev("A", 1, "x=1")} {
		cur, err = s.Head(ctx)
		require.NoError(t, err)
		appendOK(t, s, conflicting)
		_, err = s.AppendIf(ctx, []pgdcb.Event{ev("C", 1, "z=1")}, appendif.FailIf(q, &cur))
		require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "an event matching one item (%s %v) must conflict", conflicting.Type, conflicting.Tags)
	}
	// A type-only item and a match-all item.
	cur, err = s.Head(ctx)
	require.NoError(t, err)
	appendOK(t, s, ev("D", 1))
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("C", 1)}, appendif.FailIf(query.New(query.Item{Types: []string{"E"}}), &cur))
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("C", 1)}, appendif.FailIf(query.New(query.Item{Types: []string{"E", "D"}}), &cur))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("C", 1)}, appendif.FailIf(query.All(), &cur))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
}

// A forward read stopped by its limit has seen only up to its last event.
func testLimitedReadCursor(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	appendOK(t, s, ev("T", 1, "e=1"), ev("T", 2, "e=1"))
	q := query.Tagged(nil, "e=1")
	_, lim, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Limit: 1})
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("T", 3, "e=1")}, appendif.FailIf(q, &lim))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "the second event was not seen by the limited read")
	_, all, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("T", 3, "e=1")}, appendif.FailIf(q, &all))
	require.NoError(t, err)
}

// The idempotency query is checked first and over the whole log (After does
// not limit it); a match fails the append with an *appendif.IdempotentError
// and writes nothing.
func testIdempotencyQuery(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	idem := query.Tagged([]string{"OrderPlaced"}, "token=t1")
	q := query.Tagged(nil, "order=o1")
	placed, err := s.AppendIf(ctx, []pgdcb.Event{ev("OrderPlaced", 1, "token=t1", "order=o1")}, appendif.Condition{Idempotency: idem})
	require.NoError(t, err)

	h, err := s.Head(ctx)
	require.NoError(t, err)
	// A retry, even with a cursor that saw the first: idempotent.
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("OrderPlaced", 1, "token=t1", "order=o1")},
		appendif.FailIf(q, &h).WithIdempotency(idem))
	require.ErrorIs(t, err, pgdcb.ErrIdempotent)
	require.NotErrorIs(t, err, pgdcb.ErrConditionFailed)
	var ie *appendif.IdempotentError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, placed.Positions[0], ie.ExistingPosition)
	require.Equal(t, idem.String(), ie.Query.String())

	// Checked before the condition: a retry that would also conflict is
	// reported as idempotent.
	appendOK(t, s, ev("OrderShipped", 1, "order=o1"))
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("OrderPlaced", 1, "token=t1", "order=o1")},
		appendif.FailIf(q, &h).WithIdempotency(idem))
	require.ErrorIs(t, err, pgdcb.ErrIdempotent, "idempotency is checked before the condition")
	require.Equal(t, 1, count(t, s, idem))

	// A new token passes the idempotency check and still meets the condition.
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("OrderPlaced", 1, "token=t2", "order=o1")},
		appendif.FailIf(q, &h).WithIdempotency(query.Tagged([]string{"OrderPlaced"}, "token=t2")))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	h, err = s.Head(ctx)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("OrderPlaced", 1, "token=t2", "order=o1")},
		appendif.FailIf(q, &h).WithIdempotency(query.Tagged([]string{"OrderPlaced"}, "token=t2")))
	require.NoError(t, err)
	require.Equal(t, 3, count(t, s, query.All()))
}

// An event id already stored fails the whole batch with an
// *appendif.IdempotentError naming it.
func testEventID(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	e := ev("Paid", 10, "invoice=1")
	e.ID = uuid.New()
	appendOK(t, s, e)
	for _, cond := range []*appendif.Condition{nil, {FailIfEventsMatch: query.Tagged(nil, "other=1")}} {
		var err error
		batch := []pgdcb.Event{ev("Other", 1), e}
		if cond == nil {
			_, err = s.Append(ctx, batch)
		} else {
			_, err = s.AppendIf(ctx, batch, *cond)
		}
		require.ErrorIs(t, err, pgdcb.ErrIdempotent)
		var ie *appendif.IdempotentError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, e.ID.String(), ie.EventID)
		require.Equal(t, 1, count(t, s, query.All()), "the whole retried batch was refused")
	}
	evs := readAll(t, s, query.All())
	require.Equal(t, e.ID, evs[0].ID)
	require.JSONEq(t, "10", string(evs[0].Data))
}

// The first event of an append that has no id reads back with one the store
// gave it (a UUIDv7, one per append), the other events of the append
// without; an event's own id is kept. A given id is stored like a chosen
// one: appending it again fails with pgdcb.ErrIdempotent. (The PostgreSQL
// store settles calls by it: pgdcb.Event.ID.)
func testGeneratedEventIDs(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	appendOK(t, s, ev("T4", 1, "a=3", "b=3", "c=3"))
	last, _, err := s.ReadLast(ctx, query.All())
	require.NoError(t, err)
	require.NotNil(t, last)
	require.NotEqual(t, uuid.Nil, last.ID, "an event appended without an id reads back with the store's")
	require.Equal(t, uuid.Version(7), last.ID.Version())
	require.Equal(t, uuid.RFC4122, last.ID.Variant())

	own := uuid.New()
	withOwn := ev("Own", 3)
	withOwn.ID = own
	appendOK(t, s, ev("First", 1), ev("Second", 2))
	appendOK(t, s, withOwn, ev("After", 4))
	evs := readAll(t, s, query.All())
	require.Len(t, evs, 5)
	require.Equal(t, uuid.Version(7), evs[1].ID.Version(), "the first event of an append gets an id")
	require.NotEqual(t, last.ID, evs[1].ID, "one id per append")
	require.Equal(t, uuid.Nil, evs[2].ID, "the other events of the append none")
	require.Equal(t, own, evs[3].ID, "an event's own id is kept")
	require.Equal(t, uuid.Nil, evs[4].ID)

	again := ev("Again", 5)
	again.ID = last.ID
	_, err = s.Append(ctx, []pgdcb.Event{again})
	require.ErrorIs(t, err, pgdcb.ErrIdempotent, "a given id is stored")
}
