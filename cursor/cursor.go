// Package cursor defines the Cursor: a point in the event log's canonical order
// (transaction_id, position), optionally with the snapshot a decision read ran in
// and the recorded time of the event at that point.
//
// A cursor with a snapshot comes from a decision read (Read, ReadLast, Project,
// Head): the events it has "seen" are those visible in the snapshot that sort at
// or before (TransactionID, Position). A cursor without snapshot comes from a
// tailing read, which only returns events of transactions older than every
// running one; everything it has not delivered sorts after it.
package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/errs"
)

// Snapshot is a PostgreSQL pg_snapshot: transactions with id < Xmin are finished,
// those >= Xmax had not started, and those in Xip were in progress.
type Snapshot struct {
	Xmin, Xmax uint64
	Xip        []uint64 // ascending
}

// Visible reports whether the effects of transaction xid are visible in s (for a
// committed transaction).
func (s *Snapshot) Visible(xid uint64) bool {
	if xid < s.Xmin {
		return true
	}
	if xid >= s.Xmax {
		return false
	}
	_, inProgress := slices.BinarySearch(s.Xip, xid)
	return !inProgress
}

// String renders the snapshot in PostgreSQL's text form `xmin:xmax:xip,…`.
func (s *Snapshot) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(s.Xmin, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(s.Xmax, 10))
	b.WriteByte(':')
	for i, x := range s.Xip {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(x, 10))
	}
	return b.String()
}

// ParseSnapshot reads PostgreSQL's text form of a pg_snapshot.
func ParseSnapshot(text string) (*Snapshot, error) {
	parts := strings.Split(text, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("snapshot %s: want xmin:xmax:xip", clip.Quote(text))
	}
	xmin, err1 := strconv.ParseUint(parts[0], 10, 64)
	xmax, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || xmin > xmax {
		return nil, fmt.Errorf("snapshot %s: bad xmin or xmax", clip.Quote(text))
	}
	s := &Snapshot{Xmin: xmin, Xmax: xmax}
	if parts[2] != "" {
		for _, p := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(p, 10, 64)
			if err != nil || x < xmin || x >= xmax {
				return nil, fmt.Errorf("snapshot %s: bad in-progress id %s", clip.Quote(text), clip.Quote(p))
			}
			s.Xip = append(s.Xip, x)
		}
		if !slices.IsSorted(s.Xip) {
			return nil, fmt.Errorf("snapshot %s: in-progress ids not ascending", clip.Quote(text))
		}
		s.Xip = slices.Compact(s.Xip) // as PostgreSQL's pg_snapshot input skips duplicates
	}
	return s, nil
}

// Cursor is a point in the log. The zero Cursor is the start of the log: nothing
// seen.
type Cursor struct {
	TransactionID uint64
	Position      int64
	// EventTime is the recorded time (occurred_at) of the event at
	// (TransactionID, Position), in microseconds since the Unix epoch; 0 when
	// the cursor does not carry it (a cursor encoded before it existed, or
	// built from a transaction id and position alone). With it the cursor
	// names one event of one history: after a failover a different event at
	// the same point does not pass for it (docs/REPLICAS.md, "Failover").
	EventTime int64
	// Snapshot, when set, is the snapshot of the decision read that produced the
	// cursor; see the package comment.
	Snapshot *Snapshot
}

// Start is the cursor before the first event.
var Start = Cursor{}

// IsStart reports whether c is the start of the log.
func (c Cursor) IsStart() bool {
	return c.TransactionID == 0 && c.Position == 0 && c.Snapshot == nil
}

// Seen reports whether an event at (txID, position) was seen by the read that
// produced c: it sorts at or before c and, when c has a snapshot, is visible in it.
func (c Cursor) Seen(txID uint64, position int64) bool {
	if Compare(txID, position, c.TransactionID, c.Position) > 0 {
		return false
	}
	return c.Snapshot == nil || c.Snapshot.Visible(txID)
}

// Compare orders two log points by (transaction id, position).
func Compare(tx1 uint64, pos1 int64, tx2 uint64, pos2 int64) int {
	switch {
	case tx1 < tx2:
		return -1
	case tx1 > tx2:
		return 1
	case pos1 < pos2:
		return -1
	case pos1 > pos2:
		return 1
	}
	return 0
}

// invalidCursorError says why a cursor string could not be decoded. Error()
// quotes the input cut to a few hundred bytes (with its length); Input holds
// it whole.
type invalidCursorError struct {
	Input  string
	Reason string
}

func (e *invalidCursorError) Error() string {
	return "pgdcb: invalid cursor " + clip.Quote(e.Input) + ": " + clip.Reason(e.Reason)
}

// Is makes errors.Is(err, errs.ErrInvalidCursor) true.
func (e *invalidCursorError) Is(target error) bool { return target == errs.ErrInvalidCursor }

// The encodings: version 1 is (flags, transaction id, position, snapshot);
// version 2 adds, after the position, EventTime as a signed varint of its
// distance from timeBase (7 bytes for times from 2017 to 2034). A cursor
// without EventTime is encoded as version 1, as before version 2 existed.
const (
	encVersion1 = 1
	encVersion2 = 2
	flagHasSnap = 1
	timeBase    = 1767225600_000000 // 2026-01-01T00:00:00Z, microseconds since the Unix epoch
)

// String encodes the cursor as a compact, URL-safe string (base64url of varints),
// suitable for an ETag or a query parameter. Parse reverses it.
func (c Cursor) String() string {
	b := make([]byte, 0, 40)
	if c.EventTime != 0 {
		b = append(b, encVersion2)
	} else {
		b = append(b, encVersion1)
	}
	var flags byte
	if c.Snapshot != nil {
		flags |= flagHasSnap
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, c.TransactionID)
	b = binary.AppendUvarint(b, uint64(c.Position))
	if c.EventTime != 0 {
		// Wrapping difference: every int64 encodes and decodes exactly.
		b = binary.AppendVarint(b, int64(uint64(c.EventTime)-timeBase))
	}
	if s := c.Snapshot; s != nil {
		b = binary.AppendUvarint(b, s.Xmin)
		b = binary.AppendUvarint(b, s.Xmax-s.Xmin)
		b = binary.AppendUvarint(b, uint64(len(s.Xip)))
		prev := s.Xmin
		for _, x := range s.Xip {
			b = binary.AppendUvarint(b, x-prev)
			prev = x
		}
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// MarshalText implements encoding.TextMarshaler (the String form).
func (c Cursor) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Cursor) UnmarshalText(text []byte) error {
	p, err := Parse(string(text))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// Parse decodes a cursor string made by Cursor.String. Its errors match
// errs.ErrInvalidCursor.
func Parse(s string) (Cursor, error) {
	bad := func(reason string) (Cursor, error) {
		return Cursor{}, &invalidCursorError{Input: s, Reason: reason}
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > 64<<10 {
		return bad("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(b) < 2 || b[0] != encVersion1 && b[0] != encVersion2 {
		return bad("unknown encoding version")
	}
	version, flags := b[0], b[1]
	if flags&^flagHasSnap != 0 {
		return bad("unknown flags")
	}
	b = b[2:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	var c Cursor
	tx, ok1 := next()
	pos, ok2 := next()
	if !ok1 || !ok2 || pos > 1<<63-1 {
		return bad("truncated or out of range position")
	}
	c.TransactionID, c.Position = tx, int64(pos)
	if version == encVersion2 {
		d, n := binary.Varint(b)
		if n <= 0 {
			return bad("truncated event time")
		}
		b = b[n:]
		c.EventTime = int64(uint64(d) + timeBase)
		if c.EventTime == 0 {
			return bad("version 2 without event time")
		}
	}
	if flags&flagHasSnap != 0 {
		xmin, ok1 := next()
		span, ok2 := next()
		n, ok3 := next()
		if !ok1 || !ok2 || !ok3 || xmin+span < xmin || n > span {
			return bad("truncated or inconsistent snapshot")
		}
		snap := &Snapshot{Xmin: xmin, Xmax: xmin + span}
		prev := xmin
		for i := uint64(0); i < n; i++ {
			d, ok := next()
			if !ok || (i > 0 && d == 0) || prev+d < prev || prev+d >= snap.Xmax {
				return bad("truncated or inconsistent snapshot")
			}
			prev += d
			snap.Xip = append(snap.Xip, prev)
		}
		c.Snapshot = snap
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	return c, nil
}
