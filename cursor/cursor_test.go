package cursor_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []cursor.Cursor{
		{},
		{TransactionID: 750, Position: 12},
		{TransactionID: 1 << 40, Position: 1<<63 - 1},
		{TransactionID: 900, Position: 5, Snapshot: &cursor.Snapshot{Xmin: 880, Xmax: 905, Xip: []uint64{880, 890, 904}}},
		{TransactionID: 3, Position: 0, Snapshot: &cursor.Snapshot{Xmin: 10, Xmax: 10}},
	} {
		t.Run(fmt.Sprintf("txid=%d,pos=%d,snapshot=%v", c.TransactionID, c.Position, c.Snapshot != nil), func(t *testing.T) {
			s := c.String()
			require.Regexp(t, `^[A-Za-z0-9_-]+$`, s)
			back, err := cursor.Parse(s)
			require.NoError(t, err)
			require.Equal(t, c, back)
			snap := c.Snapshot
			if snap != nil {
				parsed, err := cursor.ParseSnapshot(snap.String())
				require.NoError(t, err)
				require.Equal(t, snap, parsed)
			}
		})
	}
}

// Cursors are handed out (ETags, checkpoints, URLs) and come back after an
// upgrade: these strings, encoded by v0.1.0, decode to the same cursors in
// every later release and are encoded the same (docs/RELEASING.md). A new
// form needs a new encoding version; this one keeps decoding.
func TestWireFormatIsStable(t *testing.T) {
	t.Parallel()
	for s, c := range map[string]cursor.Cursor{
		"AQDuBQw": {TransactionID: 750, Position: 12},
		"AQGEBwXwBhkDAAoO": {TransactionID: 900, Position: 5,
			Snapshot: &cursor.Snapshot{Xmin: 880, Xmax: 905, Xip: []uint64{880, 890, 904}}},
	} {
		got, err := cursor.Parse(s)
		require.NoError(t, err, s)
		require.Equal(t, c, got, s)
		require.Equal(t, s, c.String())
	}
}

func TestParseMalformed(t *testing.T) {
	t.Parallel()
	good := cursor.Cursor{TransactionID: 9, Position: 3, Snapshot: &cursor.Snapshot{Xmin: 5, Xmax: 9, Xip: []uint64{6}}}.String()
	for _, s := range []string{"", "!!!", "AA", "AgA", good[:len(good)-2], good + "AA", "not a cursor"} {
		t.Run(fmt.Sprintf("%q", s), func(t *testing.T) {
			_, err := cursor.Parse(s)
			require.ErrorIs(t, err, pgdcb.ErrInvalidCursor, s)
			var ce *cursor.InvalidCursorError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, s, ce.Input)
		})
	}
}

func TestSeen(t *testing.T) {
	t.Parallel()
	snap := &cursor.Snapshot{Xmin: 100, Xmax: 110, Xip: []uint64{100, 105}}
	c := cursor.Cursor{TransactionID: 108, Position: 50, Snapshot: snap}
	require.True(t, c.Seen(99, 1))
	require.False(t, c.Seen(100, 2), "in progress at snapshot time")
	require.True(t, c.Seen(101, 3))
	require.False(t, c.Seen(105, 4))
	require.True(t, c.Seen(108, 50))
	require.False(t, c.Seen(108, 51), "after the cursor")
	require.False(t, c.Seen(110, 1), "not started at snapshot time")
	plain := cursor.Cursor{TransactionID: 108, Position: 50}
	require.True(t, plain.Seen(100, 99))
	require.False(t, plain.Seen(109, 1))
}

func TestInvalidCursorMessageIsBounded(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("é", 1<<19)
	_, err := cursor.Parse(in)
	require.ErrorIs(t, err, pgdcb.ErrInvalidCursor)
	require.Less(t, len(err.Error()), 1024)
	require.True(t, utf8.ValidString(err.Error()), "cut between runes")
	var ce *cursor.InvalidCursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, in, ce.Input)
	_, err = cursor.ParseSnapshot(strings.Repeat("1", 1<<20))
	require.Error(t, err)
	require.Less(t, len(err.Error()), 1024)
}
