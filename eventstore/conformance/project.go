package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

func countFold(n int, _ pgdcb.StoredEvent) int { return n + 1 }

// Project hands each event to every projector whose own query matches it and
// returns the condition over the union of the queries.
func testProject(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	appendOK(t, s,
		ev("CourseDefined", 2, "course=c1"),
		ev("StudentSubscribed", 0, "course=c1", "student=s1"),
		ev("StudentSubscribed", 0, "course=c2", "student=s1"),
		ev("StudentSubscribed", 0, "course=c1", "student=s2"),
	)
	courseSubs := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, "course=c1"), 0, countFold)
	studentSubs := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, "student=s1"), 0, countFold)
	var order []int64
	logged := pgdcb.NewModel(query.Tagged(nil, "course=c1"), 0, func(n int, e pgdcb.StoredEvent) int {
		order = append(order, e.Position)
		return n + 1
	})
	cond, err := s.Project(ctx, courseSubs, studentSubs, logged)
	require.NoError(t, err)
	require.Equal(t, 2, courseSubs.State)
	require.Equal(t, 2, studentSubs.State)
	require.Equal(t, 3, logged.State)
	require.IsIncreasing(t, order, "events are folded in log order")
	require.Len(t, cond.FailIfEventsMatch.Items(), 3)
	require.NotNil(t, cond.After)
	require.NotNil(t, cond.After.Snapshot)

	// An event matching only the student's query conflicts with the union.
	appendOK(t, s, ev("StudentSubscribed", 0, "course=c3", "student=s1"))
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("StudentSubscribed", 0, "course=c1", "student=s3")}, cond)
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	// A fresh projection commits; one matching nothing does too.
	fresh := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, "student=s1"), 0, countFold)
	cond, err = s.Project(ctx, fresh)
	require.NoError(t, err)
	require.Equal(t, 3, fresh.State)
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("StudentSubscribed", 0, "course=c1", "student=s3")}, cond)
	require.NoError(t, err)
	_, err = s.Project(ctx)
	require.Error(t, err, "Project without projectors is refused")
}

// A model that opts into snapshots (Model.WithSnapshots) ends in the state a
// plain fold reaches, with the same condition, however many events it folds
// and whether or not the store used a snapshot.
func testProjectSnapshotModel(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	q := query.Tagged([]string{"Deposited"}, "account=a1")
	sum := func(n int, e pgdcb.StoredEvent) int { return n + len(e.Data) }
	total := 0
	for round := range 4 {
		var batch []pgdcb.Event
		for i := range 60 {
			batch = append(batch, ev("Deposited", i, "account=a1"), ev("Deposited", i, fmt.Sprintf("account=b%d", round)))
		}
		appendOK(t, s, batch...)
		total += 60
		snap := pgdcb.NewModel(q, 0, countFold).WithSnapshots("conformance-count", 1)
		plain := pgdcb.NewModel(q, 0, countFold)
		snapSum := pgdcb.NewModel(q, 0, sum).WithSnapshots("conformance-sum", 1)
		plainSum := pgdcb.NewModel(q, 0, sum)
		c1, err := s.Project(ctx, snap, snapSum)
		require.NoError(t, err)
		c2, err := s.Project(ctx, plain, plainSum)
		require.NoError(t, err)
		require.Equal(t, total, plain.State)
		require.Equal(t, plain.State, snap.State, "round %d: a snapshot model folds to the plain model's state", round)
		require.Equal(t, plainSum.State, snapSum.State, "round %d", round)
		require.Equal(t, point(*c2.After), point(*c1.After), "round %d: the same cursor", round)
		require.Equal(t, c2.FailIfEventsMatch.String(), c1.FailIfEventsMatch.String())
	}
}
