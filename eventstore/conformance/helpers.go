package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/racecheck"
	"github.com/pgdcb/pgdcb/query"
)

// tailTimeout bounds how long a check waits for a tailing reader: on
// PostgreSQL an open transaction of the store's database holds it back.
const tailTimeout = 60 * time.Second

// ev builds an event with a small JSON payload.
func ev(typ string, data any, tagStrings ...string) pgdcb.Event {
	return pgdcb.MustEvent(typ, data, tagStrings...)
}

func appendOK(t testing.TB, s pgdcb.Store, events ...pgdcb.Event) pgdcb.AppendResult {
	t.Helper()
	res, err := s.Append(context.Background(), events)
	require.NoError(t, err)
	return res
}

func readAll(t testing.TB, s pgdcb.Store, q query.Query) []pgdcb.StoredEvent {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), q, nil)
	require.NoError(t, err)
	return evs
}

func count(t testing.TB, s pgdcb.Store, q query.Query) int {
	t.Helper()
	return len(readAll(t, s, q))
}

func requireEmpty(t testing.TB, s pgdcb.Store, what string) {
	t.Helper()
	require.Zero(t, count(t, s, query.All()), "%s must leave no event behind", what)
}

func positions(evs []pgdcb.StoredEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Position
	}
	return out
}

// point is c without its snapshot.
func point(c cursor.Cursor) cursor.Cursor {
	return cursor.Cursor{TransactionID: c.TransactionID, Position: c.Position, EventTime: c.EventTime}
}

// The racing and the replay are shared with eventstore's own tests.
var (
	race                 = racecheck.Race
	outcomes             = racecheck.Outcomes
	verifyNoLostDecision = racecheck.VerifyNoLostDecision
)

type decisionRecord = racecheck.DecisionRecord

// tailChecked follows q from after in pages of limit until it has n events
// and a short page came (or tailTimeout passes), asserting at every page what
// a tailing reader relies on: the cursor covers the page, never moves back,
// no event comes twice, events come in log order.
func tailChecked(t testing.TB, s pgdcb.Store, q query.Query, after cursor.Cursor, limit, n int) ([]pgdcb.StoredEvent, cursor.Cursor) {
	t.Helper()
	var got []pgdcb.StoredEvent
	seen := map[int64]bool{}
	await.Until(t, tailTimeout, func() (bool, string) {
		for { // full pages are read on at once; a short one ends the poll
			b, err := s.ReadTail(context.Background(), q, after, limit)
			require.NoError(t, err)
			require.Nil(t, b.Cursor.Snapshot, "a tailing cursor carries no snapshot")
			require.GreaterOrEqual(t, cursor.Compare(b.Cursor.TransactionID, b.Cursor.Position, after.TransactionID, after.Position), 0,
				"the cursor moved back from %v to %v", after, b.Cursor)
			for _, e := range b.Events {
				require.False(t, seen[e.Position], "event at position %d delivered twice", e.Position)
				seen[e.Position] = true
				require.True(t, q.Matches(e.Type, e.Tags), "event at position %d does not match the query", e.Position)
				require.Positive(t, cursor.Compare(e.TransactionID, e.Position, after.TransactionID, after.Position),
					"event (%d, %d) is not after the cursor %v", e.TransactionID, e.Position, after)
				require.GreaterOrEqual(t, cursor.Compare(b.Cursor.TransactionID, b.Cursor.Position, e.TransactionID, e.Position), 0,
					"the page's cursor %v does not cover its event (%d, %d)", b.Cursor, e.TransactionID, e.Position)
				if k := len(got); k > 0 {
					p := got[k-1]
					require.Positive(t, cursor.Compare(e.TransactionID, e.Position, p.TransactionID, p.Position), "events out of log order")
				}
				got = append(got, e)
			}
			after = b.Cursor
			if limit == 0 || len(b.Events) < limit {
				return len(got) >= n, fmt.Sprintf("tail at horizon %d with %d of %d events", b.Horizon, len(got), n)
			}
		}
	})
	return got, after
}

// tag returns key=value with a value unique to the round.
func tag(key string, round, i int) string { return fmt.Sprintf("%s=r%dn%d", key, round, i) }
