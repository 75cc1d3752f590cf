package conformance

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/query"
)

// Bad batches are refused with an *pgdcb.InvalidEventError naming the
// event and the field, by Append and AppendIf alike, and nothing is written.
func testBadEvents(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	good := ev("Ok", 1, "k=v")
	id := uuid.New()
	withID := func(e pgdcb.Event) pgdcb.Event { e.ID = id; return e }
	cases := []struct {
		name   string
		events []pgdcb.Event
		index  int
		field  string
		says   string
	}{
		{"empty batch", nil, -1, "batch", "no events"},
		{"over MaxBatchSize", make([]pgdcb.Event, storekit.DefaultMaxBatchSize+1), -1, "batch", "MaxBatchSize"},
		{"empty type", []pgdcb.Event{good, {Type: "", Data: json.RawMessage(`{}`)}}, 1, "type", "empty"},
		{"long type", []pgdcb.Event{{Type: strings.Repeat("t", 65), Data: json.RawMessage(`{}`)}}, 0, "type", "longer than 64"},
		{"type with NUL", []pgdcb.Event{{Type: "a\x00b", Data: json.RawMessage(`{}`)}}, 0, "type", "NUL"},
		{"type not UTF-8", []pgdcb.Event{{Type: "a\xffb", Data: json.RawMessage(`{}`)}}, 0, "type", "UTF-8"},
		{"data not JSON", []pgdcb.Event{good, {Type: "X", Data: json.RawMessage(`{nope`)}}, 1, "data", "not valid JSON"},
		{"no data", []pgdcb.Event{{Type: "X"}}, 0, "data", "empty"},
		{"metadata not JSON", []pgdcb.Event{{Type: "X", Data: json.RawMessage(`1`), Metadata: json.RawMessage(`[`)}}, 0, "metadata", "not valid JSON"},
		{"NUL escape jsonb refuses", []pgdcb.Event{good, {Type: "X", Data: json.RawMessage(`"\u0000"`)}}, 1, "data", `\u0000`},
		{"number out of jsonb's range", []pgdcb.Event{{Type: "X", Data: json.RawMessage(`1e999999`)}}, 0, "data", "not valid JSON"},
		{"duplicate id in the batch", []pgdcb.Event{withID(good), withID(good)}, 1, "id", "repeats event 0"},
	}
	for i := range cases[1].events {
		cases[1].events[i] = good
	}
	conds := []*appendif.Condition{nil, {FailIfEventsMatch: query.Tagged(nil, "k=v")}}
	for _, c := range cases {
		for _, cond := range conds {
			var err error
			if cond == nil {
				_, err = s.Append(ctx, c.events)
			} else {
				_, err = s.AppendIf(ctx, c.events, *cond)
			}
			require.ErrorIs(t, err, pgdcb.ErrInvalidEvent, c.name)
			var ie *pgdcb.InvalidEventError
			require.ErrorAs(t, err, &ie, c.name)
			require.Equal(t, c.index, ie.Index, c.name)
			require.Equal(t, c.field, ie.Field, c.name)
			require.Contains(t, err.Error(), c.says, c.name)
			requireEmpty(t, s, c.name)
		}
	}
}

// Bad conditions and queries are refused with pgdcb.ErrInvalidQuery, negative
// limits with a *pgdcb.InvalidArgumentError, and nothing is written.
func testBadQueries(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	x := []pgdcb.Event{ev("X", 1)}
	_, err := s.AppendIf(ctx, x, appendif.Condition{})
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery, "a condition must have something to check")
	// A snapshot name PostgreSQL's text cannot hold is refused up front, by
	// every store (memstore folds from the start, but refuses the same input).
	m := pgdcb.NewModel(query.Tagged(nil, "a=b"), 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 }).
		WithSnapshots("nul\x00name", 1)
	_, err = s.Project(ctx, m)
	var ae *pgdcb.InvalidArgumentError
	require.ErrorAs(t, err, &ae, "a snapshot name with NUL")
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	cur, err := s.Head(ctx)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, x, appendif.Condition{After: &cur, Idempotency: query.Tagged(nil, "a=b")})
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery, "After without FailIfEventsMatch")
	_, err = s.AppendIf(ctx, x, appendif.FailIf(query.New(query.Item{Types: []string{""}}), nil))
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	require.Contains(t, err.Error(), "item 0")
	_, err = s.AppendIf(ctx, x, appendif.Condition{Idempotency: query.New(query.Item{Types: []string{strings.Repeat("x", 70)}})})
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	// A bad condition is refused before the events are looked at.
	_, err = s.AppendIf(ctx, nil, appendif.Condition{})
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)

	bad := query.New(query.Item{Types: []string{strings.Repeat("x", 70)}})
	_, _, err = s.ReadAll(ctx, bad, nil)
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	_, _, err = s.ReadLast(ctx, bad)
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	_, err = s.ReadTail(ctx, bad, cursor.Start, 0)
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	_, err = s.Project(ctx, pgdcb.NewModel(bad, 0, countFold))
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	n := 0
	for _, err := range s.Read(ctx, bad, nil).All() {
		require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
		n++
	}
	require.Equal(t, 1, n, "a refused read yields its error alone")

	_, err = s.ReadTail(ctx, query.All(), cursor.Start, -5)
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.ErrorContains(t, err, "-5")
	var ia *pgdcb.InvalidArgumentError
	require.ErrorAs(t, err, &ia)
	_, _, err = s.ReadAll(ctx, query.All(), &pgdcb.ReadOptions{Limit: -1})
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.ErrorContains(t, err, "ReadOptions.Limit")
	requireEmpty(t, s, "a refused call")
}

// The default size limits: an event over DefaultMaxEventBytes and a batch
// over DefaultMaxBatchBytes are refused before anything is written; an event
// at the limit is stored whole.
func testSizeLimits(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	payload := func(size int) json.RawMessage { // a JSON string of size bytes
		return json.RawMessage(`"` + strings.Repeat("a", size-2) + `"`)
	}
	// Type "E" (1 byte) plus data.
	atLimit := pgdcb.Event{Type: "E", Data: payload(storekit.DefaultMaxEventBytes - 1)}
	over := pgdcb.Event{Type: "E", Data: payload(storekit.DefaultMaxEventBytes)}
	_, err := s.Append(ctx, []pgdcb.Event{over})
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
	var ie *pgdcb.InvalidEventError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "size", ie.Field)
	require.Contains(t, err.Error(), "MaxEventBytes")
	requireEmpty(t, s, "an event over the size limit")

	n := storekit.DefaultMaxBatchBytes/storekit.DefaultMaxEventBytes + 1
	batch := make([]pgdcb.Event, n)
	for i := range batch {
		batch[i] = atLimit
	}
	_, err = s.Append(ctx, batch)
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "batch", ie.Field)
	require.Contains(t, err.Error(), "MaxBatchBytes")
	requireEmpty(t, s, "a batch over the size limit")

	appendOK(t, s, atLimit)
	evs := readAll(t, s, query.All())
	require.Len(t, evs, 1)
	require.Equal(t, storekit.DefaultMaxEventBytes, evs[0].Size())
}

// A context that has already ended fails every call, and nothing is written.
func testEndedContext(t testing.TB, s pgdcb.Store, _ Options) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Append(ctx, []pgdcb.Event{ev("E", 1, "k=v")})
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.AppendIf(ctx, []pgdcb.Event{ev("E", 1, "k=v")}, appendif.FailIf(query.Tagged(nil, "k=v"), nil))
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = s.ReadAll(ctx, query.All(), nil)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Head(ctx)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.ReadTail(ctx, query.All(), cursor.Start, 0)
	require.ErrorIs(t, err, context.Canceled)
	requireEmpty(t, s, "a call with an ended context")
}
