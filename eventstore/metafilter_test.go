package eventstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

// A tailing read narrowed by MetadataContains returns the matching events
// alone, with ReadTail's cursor rules: a short page moves the cursor to the
// last event of the whole log below the horizon, whatever it matches. A
// forward Read narrowed the same way returns the same events. The filter is
// a literal in the statement: quotes and backslashes in it stay data.
func TestTailMetadataContains(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, nil)
	ctx := context.Background()
	marker := json.RawMessage(`{"src": "it's a \\ test"}`)
	ev := func(typ string, meta json.RawMessage) pgdcb.Event {
		e := pgdcb.MustEvent(typ, map[string]any{"n": 1})
		e.Metadata = meta
		return e
	}
	_, err := s.Append(ctx, []pgdcb.Event{ev("A", marker), ev("B", json.RawMessage(`{"src": "other"}`))})
	require.NoError(t, err)
	_, err = s.Append(ctx, []pgdcb.Event{ev("C", nil), ev("D", json.RawMessage(`{"src": "it's a \\ test", "more": 1}`))})
	require.NoError(t, err)
	last, err := s.Append(ctx, []pgdcb.Event{ev("E", nil)})
	require.NoError(t, err)

	var got []string
	after := cursor.Start
	await.Until(t, time.Minute, func() (bool, string) {
		b, err := s.ReadTailWith(ctx, query.All(), eventstore.TailOptions{After: after, Limit: 10, MetadataContains: marker})
		require.NoError(t, err)
		for _, e := range b.Events {
			got = append(got, e.Type)
		}
		after = b.Cursor
		return cursor.Compare(after.TransactionID, after.Position, last.Cursor().TransactionID, last.Cursor().Position) >= 0,
			fmt.Sprintf("the tail at %v, before the last event (horizon held by %+v)", after, b.HorizonHolder)
	})
	require.Equal(t, []string{"A", "D"}, got)
	require.Equal(t, last.Cursor().Position, after.Position, "a short page moves the cursor to the last event of the log")

	all, _, err := s.ReadAll(ctx, query.All(), &pgdcb.ReadOptions{MetadataContains: marker})
	require.NoError(t, err)
	require.Len(t, all, 2)

	for _, bad := range []string{`[1]`, `"x"`, `{`, `null`} {
		_, err := s.ReadTailWith(ctx, query.All(), eventstore.TailOptions{MetadataContains: json.RawMessage(bad)})
		require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, bad)
	}
}
