package cursor_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
)

// Whatever Parse accepts encodes back (String) to a string that parses to
// the same cursor; whatever it refuses, it refuses with an error matching
// pgdcb.ErrInvalidCursor.
func FuzzParse(f *testing.F) {
	snap := &cursor.Snapshot{Xmin: 100, Xmax: 110, Xip: []uint64{100, 103, 109}}
	for _, c := range []cursor.Cursor{
		cursor.Start,
		{TransactionID: 1, Position: 1},
		{TransactionID: 215294, Position: 88, Snapshot: snap},
		{TransactionID: 9, Position: 3, Snapshot: &cursor.Snapshot{Xmin: 5, Xmax: 9, Xip: []uint64{6, 7}}},
		{TransactionID: 1<<64 - 1, Position: 1<<63 - 1, Snapshot: &cursor.Snapshot{Xmin: 5, Xmax: 5}},
		{TransactionID: 766, Position: 34, EventTime: 1796000000123456, Snapshot: &cursor.Snapshot{Xmin: 767, Xmax: 767}},
		{TransactionID: 9, Position: 3, EventTime: -1 << 63, Snapshot: &cursor.Snapshot{Xmin: 5, Xmax: 9, Xip: []uint64{6, 7}}},
		{TransactionID: 1, Position: 1, EventTime: 1},
	} {
		f.Add(c.String())
	}
	for _, s := range []string{"", "AQGLkg0G878NAAA", "AQD9vw3__________38", "AA", "AQI", "AQA", "not base64!", "AQEAAAAA", "AQH-BSL_BQAA", "AgAJAw", "AwAJAwA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := cursor.Parse(s)
		if err != nil {
			if !errors.Is(err, pgdcb.ErrInvalidCursor) {
				t.Fatalf("Parse(%q): untyped error %v", s, err)
			}
			return
		}
		if c.Position < 0 {
			t.Fatalf("Parse(%q): negative position %d", s, c.Position)
		}
		if (s[:2] == "Ag") != (c.EventTime != 0) {
			t.Fatalf("Parse(%q): event time %d, but version 2 carries one and version 1 none", s, c.EventTime)
		}
		if sn := c.Snapshot; sn != nil {
			checkSnapshot(t, s, sn)
		}
		back, err := cursor.Parse(c.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %+v, whose String %q does not parse: %v", s, c, c.String(), err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip of %q: %+v became %+v", s, c, back)
		}
		var viaText cursor.Cursor
		if err := viaText.UnmarshalText([]byte(s)); err != nil || !reflect.DeepEqual(viaText, c) {
			t.Fatalf("UnmarshalText(%q) = %+v, %v; Parse gave %+v", s, viaText, err, c)
		}
	})
}

// Whatever ParseSnapshot accepts (PostgreSQL's xmin:xmax:xip text) is a
// consistent snapshot that prints back to a text parsing to the same
// snapshot, and that a cursor carries through String and Parse.
func FuzzParseSnapshot(f *testing.F) {
	for _, s := range []string{"1:1:", "100:110:100,103,109", "5:9:", "9:5:", "1:5:2,2", "1:5:3,2",
		"1:5:5", "0:0:", ":", "1:2", "18446744073709551615:18446744073709551615:", "1:3:1,,2", "1:3:+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sn, err := cursor.ParseSnapshot(s)
		if err != nil {
			return
		}
		checkSnapshot(t, s, sn)
		back, err := cursor.ParseSnapshot(sn.String())
		if err != nil || !reflect.DeepEqual(back, sn) {
			t.Fatalf("ParseSnapshot(%q) = %+v, printed %q, parsed back %+v, %v", s, sn, sn.String(), back, err)
		}
		c := cursor.Cursor{TransactionID: sn.Xmax, Position: 1, Snapshot: sn}
		viaCursor, err := cursor.Parse(c.String())
		if err != nil || !reflect.DeepEqual(viaCursor, c) {
			t.Fatalf("a cursor with the snapshot %q does not round trip: %+v, %v", s, viaCursor, err)
		}
	})
}

// checkSnapshot fails unless sn is what PostgreSQL can produce: xmin <= xmax,
// in-progress ids strictly ascending in [xmin, xmax), and Visible agreeing.
func checkSnapshot(t *testing.T, input string, sn *cursor.Snapshot) {
	t.Helper()
	if sn.Xmin > sn.Xmax {
		t.Fatalf("%q: xmin %d > xmax %d", input, sn.Xmin, sn.Xmax)
	}
	for i, x := range sn.Xip {
		if x < sn.Xmin || x >= sn.Xmax || (i > 0 && x <= sn.Xip[i-1]) {
			t.Fatalf("%q: in-progress ids %v out of [%d, %d) or not strictly ascending", input, sn.Xip, sn.Xmin, sn.Xmax)
		}
		if sn.Visible(x) {
			t.Fatalf("%q: in-progress %d visible", input, x)
		}
	}
	if sn.Xmin > 0 && !sn.Visible(sn.Xmin-1) {
		t.Fatalf("%q: %d below xmin not visible", input, sn.Xmin-1)
	}
	if sn.Visible(sn.Xmax) {
		t.Fatalf("%q: xmax %d visible", input, sn.Xmax)
	}
}
