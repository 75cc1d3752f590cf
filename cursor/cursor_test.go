package cursor_test

import (
	"encoding/base64"
	"encoding/binary"
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
		// Version 2: with the event's recorded time, including times far
		// from the encoding's base and the extremes of int64.
		{TransactionID: 766, Position: 34, EventTime: 1796000000123456, Snapshot: &cursor.Snapshot{Xmin: 767, Xmax: 767}},
		{TransactionID: 750, Position: 12, EventTime: 1},
		{TransactionID: 750, Position: 12, EventTime: -1},
		{TransactionID: 1 << 40, Position: 1<<63 - 1, EventTime: 1<<63 - 1},
		{TransactionID: 1, Position: 1, EventTime: -1 << 63, Snapshot: &cursor.Snapshot{Xmin: 1, Xmax: 3, Xip: []uint64{2}}},
	} {
		t.Run(fmt.Sprintf("txid=%d,pos=%d,time=%d,snapshot=%v", c.TransactionID, c.Position, c.EventTime, c.Snapshot != nil), func(t *testing.T) {
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

// Cursors encoded before version 2 (stored checkpoints, ETags, clients'
// cursors) decode as they did, without an event time, and encode back to the
// same text; a cursor with an event time is version 2, and ten
// characters longer.
func TestVersion1CursorsStillDecode(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]cursor.Cursor{
		"AQGLkg0G878NAAA":     {TransactionID: 215307, Position: 6, Snapshot: &cursor.Snapshot{Xmin: 221171, Xmax: 221171}},
		"AQD9vw3__________38": {TransactionID: 221181, Position: 1<<63 - 1},
		"AQH-BSL_BQAA":        {TransactionID: 766, Position: 34, Snapshot: &cursor.Snapshot{Xmin: 767, Xmax: 767}},
	} {
		c, err := cursor.Parse(s)
		require.NoError(t, err, s)
		require.Equal(t, want, c, s)
		require.Zero(t, c.EventTime, s)
		require.Equal(t, s, c.String(), "a version 1 cursor encodes back to itself")
	}
	v1 := cursor.Cursor{TransactionID: 766, Position: 34, Snapshot: &cursor.Snapshot{Xmin: 767, Xmax: 767}}
	v2 := v1
	v2.EventTime = 1796000000123456 // 2026-12-01
	require.Equal(t, "AQH-BSL_BQAA", v1.String())
	require.Equal(t, byte('A'), v2.String()[0])
	require.Equal(t, byte('g'), v2.String()[1], "version 2")
	require.Len(t, v1.String(), 12)
	require.Len(t, v2.String(), 22)
}

func TestParseMalformed(t *testing.T) {
	t.Parallel()
	good := cursor.Cursor{TransactionID: 9, Position: 3, Snapshot: &cursor.Snapshot{Xmin: 5, Xmax: 9, Xip: []uint64{6}}}.String()
	goodV2 := cursor.Cursor{TransactionID: 9, Position: 3, EventTime: 1796000000123456}.String()
	// "AgAJAwA": version 2 whose event time is the base's negation, so 0:
	// not what String writes for a cursor without a time.
	for _, s := range []string{"", "!!!", "AA", "AwA", good[:len(good)-2], good + "AA", "not a cursor",
		goodV2[:len(goodV2)-2], goodV2 + "AA", "AgAJAw", zeroTimeV2()} {
		t.Run(fmt.Sprintf("%q", s), func(t *testing.T) {
			_, err := cursor.Parse(s)
			require.ErrorIs(t, err, pgdcb.ErrInvalidCursor, s)
			var ce *cursor.InvalidCursorError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, s, ce.Input)
		})
	}
}

// zeroTimeV2 is a version 2 cursor whose event time decodes to 0.
func zeroTimeV2() string {
	b := []byte{2, 0, 9, 3}
	b = binary.AppendVarint(b, -1767225600_000000)
	return base64.RawURLEncoding.EncodeToString(b)
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
