package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// One transaction id per append, increasing; positions in batch order,
// increasing; stored events read back as appended.
func testAppendPositions(t testing.TB, s pgdcb.Store, _ Options) {
	var prev pgdcb.AppendResult
	for i := range 5 {
		batch := []pgdcb.Event{ev("A", i, "k=v"), ev("B", map[string]int{"i": i}, "k=v", "x=1"), ev("C", nil)}
		batch[1].Metadata = []byte(`{"corr":"c1"}`)
		res := appendOK(t, s, batch...)
		require.Len(t, res.Positions, 3)
		require.Positive(t, res.TransactionID)
		for j := 1; j < 3; j++ {
			require.Greater(t, res.Positions[j], res.Positions[j-1], "positions in batch order")
		}
		if i > 0 {
			require.Greater(t, res.TransactionID, prev.TransactionID, "a later append has a larger transaction id")
			require.Greater(t, res.Positions[0], prev.Positions[2], "a later append has larger positions")
		}
		prev = res
	}
	evs := readAll(t, s, query.All())
	require.Len(t, evs, 15)
	for i, e := range evs {
		require.Equal(t, []string{"A", "B", "C"}[i%3], e.Type)
		require.False(t, e.OccurredAt.IsZero(), "OccurredAt is set")
		if i > 0 {
			p := evs[i-1]
			require.Positive(t, cursor.Compare(e.TransactionID, e.Position, p.TransactionID, p.Position), "log order")
			if i%3 != 0 {
				require.Equal(t, p.TransactionID, e.TransactionID, "one transaction id per append")
			}
		}
	}
	require.JSONEq(t, `{"i":0}`, string(evs[1].Data))
	require.JSONEq(t, `{"corr":"c1"}`, string(evs[1].Metadata))
	require.Equal(t, tags.MustParseSet("k=v", "x=1").Strings(), evs[1].Tags.Strings())
	require.JSONEq(t, `null`, string(evs[2].Data))
	require.Empty(t, evs[2].Metadata)
	require.Equal(t, 0, evs[2].Tags.Len())

	// The caller's slices are not the store's.
	evs[1].Data[0] = 'X'
	again := readAll(t, s, query.All())
	require.JSONEq(t, `{"i":0}`, string(again[1].Data), "changing a read event must not change the log")
}

func testReadOptions(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	var batch []pgdcb.Event
	for i := range 10 {
		batch = append(batch, ev("T", i, "e=1", fmt.Sprintf("n=%d", i%2)))
	}
	res := appendOK(t, s, batch...)
	other := appendOK(t, s, ev("Other", 0, "e=2"))
	q := query.Tagged(nil, "e=1")

	all, head, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Equal(t, res.Positions, positions(all), "batch order is log order")
	require.Equal(t, other.Positions[0], head.Position, "a full read's cursor is the head of the log, whatever the query")
	require.Equal(t, other.TransactionID, head.TransactionID)
	require.NotNil(t, head.Snapshot, "a decision read's cursor carries its snapshot")

	evs, lim, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, res.Positions[:3], positions(evs))
	require.Equal(t, res.Positions[2], lim.Position, "a limited read has seen only up to its last event")
	require.NotNil(t, lim.Snapshot)
	rest, _, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{After: &lim})
	require.NoError(t, err)
	require.Equal(t, res.Positions[3:], positions(rest), "reading after the cursor continues")
	none, _, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{After: &head})
	require.NoError(t, err)
	require.Empty(t, none, "nothing after the head")

	back, bc, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Backwards: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{res.Positions[9], res.Positions[8]}, positions(back))
	require.Equal(t, point(head), point(bc), "a backward read's cursor is the head")
	backAll, _, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Backwards: true})
	require.NoError(t, err)
	require.Len(t, backAll, 10)
	require.Equal(t, res.Positions[9], backAll[0].Position)
	require.Equal(t, res.Positions[0], backAll[9].Position)

	exact, ec, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Limit: 10})
	require.NoError(t, err)
	require.Len(t, exact, 10)
	require.Equal(t, res.Positions[9], ec.Position, "a forward read that reached its limit has seen up to its last event")

	// OR-ed items: type-only, types and tags.
	mixed, _, err := s.ReadAll(ctx, query.New(
		query.Item{Types: []string{"Other"}},
		query.Item{Types: []string{"T", "Nope"}, Tags: tags.MustParseSet("n=1", "e=1")},
	), nil)
	require.NoError(t, err)
	require.Len(t, mixed, 6)
	for _, e := range mixed {
		require.True(t, e.Type == "Other" || e.Tags.Has(tags.MustParse("n=1")))
	}
	require.Empty(t, readAll(t, s, query.Tagged([]string{"T"}, "e=2")), "an item's types and tags are AND-ed")
	require.Empty(t, readAll(t, s, query.Query{}), "the empty query matches nothing")
	require.Len(t, readAll(t, s, query.All()), 11)
}

func testReadIterator(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	appendOK(t, s, ev("A", 1), ev("A", 2), ev("A", 3))
	es := s.Read(ctx, query.All(), nil)
	_, ok := es.Cursor()
	require.False(t, ok, "no cursor before the iteration")
	n := 0
	for _, err := range es.All() {
		require.NoError(t, err)
		n++
		if n == 2 {
			break
		}
	}
	_, ok = es.Cursor()
	require.False(t, ok, "no cursor from an unfinished read")
	failed := false
	for _, err := range es.All() {
		require.Error(t, err, "an Events is iterated once")
		failed = true
	}
	require.True(t, failed, "a second iteration yields an error")

	// The snapshot is taken when the iteration starts.
	es = s.Read(ctx, query.All(), nil)
	appendOK(t, s, ev("A", 4))
	n = 0
	for _, err := range es.All() {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 4, n, "a read sees what committed before its iteration started")
	c, ok := es.Cursor()
	require.True(t, ok)
	h, err := s.Head(ctx)
	require.NoError(t, err)
	require.Equal(t, point(h), point(c))
}

func testHeadAndReadLast(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	h0, err := s.Head(ctx)
	require.NoError(t, err)
	require.Zero(t, h0.TransactionID, "the head of an empty log is its start")
	require.Zero(t, h0.Position)
	require.NotNil(t, h0.Snapshot)
	last, c, err := s.ReadLast(ctx, query.All())
	require.NoError(t, err)
	require.Nil(t, last)
	require.NotNil(t, c.Snapshot)

	r1 := appendOK(t, s, ev("Numbered", 1, "seq=1"), ev("Numbered", 2, "seq=1"))
	appendOK(t, s, ev("Other", 3, "seq=2"))
	h, err := s.Head(ctx)
	require.NoError(t, err)
	require.NotNil(t, h.Snapshot)
	evs := readAll(t, s, query.All())
	require.Equal(t, evs[2].Position, h.Position, "Head names the last event")
	require.Equal(t, evs[2].TransactionID, h.TransactionID)
	for _, e := range evs {
		require.True(t, h.Seen(e.TransactionID, e.Position), "Head has seen every event")
	}

	last, c, err = s.ReadLast(ctx, query.Tagged(nil, "seq=1"))
	require.NoError(t, err)
	require.NotNil(t, last)
	require.Equal(t, r1.Positions[1], last.Position)
	require.JSONEq(t, "2", string(last.Data))
	require.Equal(t, point(h), point(c), "ReadLast's cursor is the head")
	none, _, err := s.ReadLast(ctx, query.Tagged(nil, "seq=9"))
	require.NoError(t, err)
	require.Nil(t, none)
}
