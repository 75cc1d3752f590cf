package eventstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/appendif"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, nil)
	res, err := s.Append(ctx, []eventstore.Event{
		eventstore.MustEvent("CourseDefined", map[string]any{"capacity": 2}, "course=c1"),
		eventstore.MustEvent("StudentSubscribed", map[string]any{}, "course=c1", "student=s1"),
	})
	require.NoError(t, err)
	require.Len(t, res.Positions, 2)
	evs, cur, err := s.ReadAll(ctx, query.Tagged(nil, "course=c1"), nil)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	t.Logf("cursor %+v %v %s", cur, cur.Snapshot, cur.String())
	_, err = s.AppendIf(ctx, []eventstore.Event{eventstore.MustEvent("StudentSubscribed", map[string]any{}, "course=c1", "student=s2")},
		appendif.FailIf(query.Tagged(nil, "course=c1"), &cur))
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []eventstore.Event{eventstore.MustEvent("StudentSubscribed", map[string]any{}, "course=c1", "student=s3")},
		appendif.FailIf(query.Tagged(nil, "course=c1"), &cur))
	require.Error(t, err)
	t.Log(err)
}
