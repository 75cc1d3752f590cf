package eventstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

func positions(evs []pgdcb.StoredEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Position
	}
	return out
}

func TestReadOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	var batch []pgdcb.Event
	for i := range 10 {
		batch = append(batch, pgdcb.MustEvent("T", i, "e=1", fmt.Sprintf("n=%d", i%2)))
	}
	res, err := s.Append(ctx, batch)
	require.NoError(t, err)
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", 0, "e=2")})
	require.NoError(t, err)
	q := query.Tagged(nil, "e=1")

	all, head, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Equal(t, res.Positions, positions(all), "batch order is log order")
	require.Equal(t, res.Positions[0]+10, head.Position, "a full read's cursor is the head of the log")

	evs, lim, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, res.Positions[:3], positions(evs))
	require.Equal(t, res.Positions[2], lim.Position, "a limited read has seen only up to its last event")
	rest, _, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{After: &lim})
	require.NoError(t, err)
	require.Equal(t, res.Positions[3:], positions(rest), "reading after the cursor continues")

	back, _, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Backwards: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{res.Positions[9], res.Positions[8]}, positions(back))

	last, _, err := s.ReadLast(ctx, query.Tagged(nil, "n=0"))
	require.NoError(t, err)
	require.Equal(t, res.Positions[8], last.Position)
	none, c, err := s.ReadLast(ctx, query.Tagged(nil, "n=9"))
	require.NoError(t, err)
	require.Nil(t, none)
	require.NotNil(t, c.Snapshot)

	// Type and tag items, OR-ed, through SQL.
	mixed, _, err := s.ReadAll(ctx, query.New(
		query.Item{Types: []string{"Other"}},
		query.Item{Types: []string{"T", "Nope"}, Tags: tags.MustParseSet("n=1", "e=1")},
	), nil)
	require.NoError(t, err)
	require.Len(t, mixed, 6)
	for _, e := range mixed {
		require.True(t, e.Type == "Other" || e.Tags.Has(tags.MustParse("n=1")))
	}

	// Streaming stops early on break and the connection is released.
	es := s.Read(ctx, query.All(), nil)
	n := 0
	for _, err := range es.All() {
		require.NoError(t, err)
		n++
		if n == 2 {
			break
		}
	}
	_, ok := es.Cursor()
	require.False(t, ok, "no cursor from an unfinished read")
	for _, err := range es.All() {
		require.Error(t, err, "an Events is iterated once")
	}
	require.Equal(t, 11, countEvents(t, s, query.All()))
}

func TestLimitedReadCursorConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("T", 1, "e=1"), pgdcb.MustEvent("T", 2, "e=1")})
	require.NoError(t, err)
	q := query.Tagged(nil, "e=1")
	_, lim, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Limit: 1})
	require.NoError(t, err)
	// The decision saw only the first event: the second is a conflict.
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("T", 3, "e=1")}, appendif.FailIf(q, &lim))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
}

func TestProjectDispatchesByItsOwnQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	_, err := s.Append(ctx, []pgdcb.Event{
		pgdcb.MustEvent("CourseDefined", 2, "course=c1"),
		pgdcb.MustEvent("StudentSubscribed", 0, "course=c1", "student=s1"),
		pgdcb.MustEvent("StudentSubscribed", 0, "course=c2", "student=s1"),
		pgdcb.MustEvent("StudentSubscribed", 0, "course=c1", "student=s2"),
	})
	require.NoError(t, err)
	count := func(n int, _ pgdcb.StoredEvent) int { return n + 1 }
	courseSubs := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, "course=c1"), 0, count)
	studentSubs := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, "student=s1"), 0, count)
	cond, err := s.Project(ctx, courseSubs, studentSubs)
	require.NoError(t, err)
	require.Equal(t, 2, courseSubs.State)
	require.Equal(t, 2, studentSubs.State)
	require.Len(t, cond.FailIfEventsMatch.Items(), 2)

	// An event matching only the student's query conflicts with the union.
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", 0, "course=c3", "student=s1")})
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", 0, "course=c1", "student=s3")}, cond)
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
}
