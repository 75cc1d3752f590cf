package eventstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
)

// The events of members that passed are inserted together (one statement per
// run of them, sql/functions/append_group.sql): a member with checks must still see the
// events of the plain members queued before it, every member gets its own
// positions in member order, and each event lands with its own type, tags
// and data.
func TestGroupPlainMembersBeforeACheck(t *testing.T) {
	ctx := context.Background()
	s, pool := groupStore(t)
	_, cur, err := s.ReadAll(ctx, query.Tagged(nil, "slot=p2"), nil)
	require.NoError(t, err)
	ev := func(member, i int, tags ...string) pgdcb.Event {
		return pgdcb.MustEvent(fmt.Sprintf("M%d", member), map[string]int{"member": member, "i": i}, tags...)
	}
	calls := []func() (pgdcb.AppendResult, error){
		// 0. plain, two events.
		func() (pgdcb.AppendResult, error) {
			return s.Append(ctx, []pgdcb.Event{ev(0, 0, "slot=p1", "m=0"), ev(0, 1, "m=0")})
		},
		// 1. plain, on slot=p2: waits for the insert when 2 comes.
		func() (pgdcb.AppendResult, error) {
			return s.Append(ctx, []pgdcb.Event{ev(1, 0, "slot=p2", "m=1")})
		},
		// 2. decides slot=p2 is empty: must see 1's event, still waiting.
		func() (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{ev(2, 0, "slot=p2", "m=2")}, appendif.FailIf(query.Tagged(nil, "slot=p2"), &cur))
		},
		// 3. plain, three events, no tags on the middle one.
		func() (pgdcb.AppendResult, error) {
			return s.Append(ctx, []pgdcb.Event{ev(3, 0, "slot=p3", "m=3"), ev(3, 1), ev(3, 2, "m=3", "x=y")})
		},
		// 4. an unrelated boundary: passes, and its event waits with 3's.
		func() (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{ev(4, 0, "slot=p9", "m=4")}, appendif.FailIf(query.Tagged(nil, "slot=p9"), &cur))
		},
		// 5. idempotency on 3's type, without tags: must see 3's events.
		func() (pgdcb.AppendResult, error) {
			return s.AppendIf(ctx, []pgdcb.Event{ev(5, 0, "m=5")}, appendif.Condition{Idempotency: query.Tagged([]string{"M3"})})
		},
		// 6. plain, last: inserted after the members loop.
		func() (pgdcb.AppendResult, error) {
			return s.Append(ctx, []pgdcb.Event{ev(6, 0, "slot=p1", "m=6")})
		},
	}
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	wait := startBlocker(t, s)
	res, errs := queueInOrder(t, s, conn, calls)
	wait()

	var cf *appendif.ConditionFailedError
	require.ErrorAs(t, errs[2], &cf)
	require.Equal(t, res[1].Positions[0], cf.ConflictPosition, "2 saw 1's waiting event")
	require.ErrorIs(t, errs[5], pgdcb.ErrIdempotent)
	var ie *appendif.IdempotentError
	require.ErrorAs(t, errs[5], &ie)
	require.Contains(t, res[3].Positions, ie.ExistingPosition, "5 saw 3's events")

	// The committed members, in member order: their positions ascend across
	// members, one run per member.
	committed := []int{0, 1, 3, 4, 6}
	sizes := map[int]int{0: 2, 1: 1, 3: 3, 4: 1, 6: 1}
	var last int64
	for _, m := range committed {
		require.NoError(t, errs[m], "member %d", m)
		require.Len(t, res[m].Positions, sizes[m], "member %d", m)
		require.Equal(t, res[0].TransactionID, res[m].TransactionID, "member %d", m)
		for _, p := range res[m].Positions {
			require.Greater(t, p, last, "member %d", m)
			last = p
		}
	}
	// Each stored event is the one given, at the position its member got.
	all, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	byPos := map[int64]pgdcb.StoredEvent{}
	for _, e := range all {
		byPos[e.Position] = e
	}
	want := map[int][]pgdcb.Event{
		0: {ev(0, 0, "slot=p1", "m=0"), ev(0, 1, "m=0")},
		1: {ev(1, 0, "slot=p2", "m=1")},
		3: {ev(3, 0, "slot=p3", "m=3"), ev(3, 1), ev(3, 2, "m=3", "x=y")},
		4: {ev(4, 0, "slot=p9", "m=4")},
		6: {ev(6, 0, "slot=p1", "m=6")},
	}
	stored := 0
	for _, m := range committed {
		for j, p := range res[m].Positions {
			got, ok := byPos[p]
			require.True(t, ok, "member %d event %d at %d", m, j, p)
			w := want[m][j]
			require.Equal(t, w.Type, got.Type)
			require.Equal(t, w.Tags.Strings(), got.Tags.Strings(), "member %d event %d", m, j)
			require.JSONEq(t, string(w.Data), string(got.Data))
			stored++
		}
	}
	require.Equal(t, stored+1, len(all), "the blocker's event and the committed members' events, nothing else")
}
