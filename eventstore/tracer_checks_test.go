package eventstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// TraceAppendEndData.CheckItems counts the query items of the checks of the
// calls the server decided, on the grouped and the ungrouped path alike.
func TestTracerCheckItems(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		name := "grouped"
		if off {
			name = "ungrouped"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			r := &recorder{}
			s, _ := newStore(t, &eventstore.Config{Tracer: r, GroupCommitDisabled: off})
			ev := pgdcb.MustEvent("Paid", nil, "op=1", "acct=a")
			cond := appendif.FailIf(query.Tagged(nil, "acct=a").Or(query.Tagged([]string{"Closed"})), nil).
				WithIdempotency(query.Tagged(nil, "op=1"))

			_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "acct=b")})
			require.NoError(t, err)
			_, err = s.AppendIf(ctx, []pgdcb.Event{ev}, cond)
			require.NoError(t, err)
			_, err = s.AppendIf(ctx, []pgdcb.Event{ev}, cond)
			require.ErrorIs(t, err, pgdcb.ErrIdempotent)
			_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Paid", nil, "op=2")}, appendif.FailIf(query.Tagged(nil, "acct=a"), nil))
			require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
			_, err = s.AppendIf(ctx, []pgdcb.Event{{Data: []byte(`{}`)}}, cond)
			require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)

			r.mu.Lock()
			defer r.mu.Unlock()
			got := make([]int, len(r.appends))
			for i, a := range r.appends {
				got[i] = a.CheckItems
			}
			require.Equal(t, []int{0, 3, 3, 1, 0}, got, "Append, committed, idempotent, condition failed, invalid")
		})
	}
}
