package logical

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
)

// Checkpoint is where a logical reader resumes. The zero Checkpoint means
// "start from scratch": a new slot, and a snapshot read of every event
// committed before it.
type Checkpoint struct {
	// LSN is the commit LSN of the transaction the reader is in (or has just
	// finished), or a stream position between transactions: every
	// transaction that committed before it was consumed.
	LSN pglogrepl.LSN
	// Skip is how many inserted events of the transaction committed at LSN
	// were already consumed (all of them when it is finished): on resume they
	// are skipped. This is how a transaction split across batches resumes
	// exactly once.
	Skip int64
	// Sync is set while the reader delivers the events committed before its
	// slot was created (the initial snapshot read, or the resynchronisation
	// after a lost slot); nil afterwards.
	Sync *syncRead
	// Done names, in log terms, every transaction consumed so far, so that a
	// reader whose slot is lost can resynchronise from the log without
	// skipping or repeating an event (Open). It is nil when the reader does
	// not know it yet (before its first sample of the log passed) or when it
	// would be too long to store (a backlog in flight); a lost slot then
	// stops the reader with ErrSlotLost. During a resynchronisation (Sync
	// set) it is what the snapshot read leaves out.
	Done *Done
}

// Done is the set of transactions a logical reader has consumed, beyond
// its log-order tail: every transaction visible in Snapshot (a sample of
// the log the stream has passed), every transaction in XIDs, and the events
// of transaction PartXID up to position PartPos (a transaction split across
// batches; PartXID 0 when there is none).
type Done struct {
	Snapshot *cursor.Snapshot
	XIDs     []uint64 // ascending
	PartXID  uint64
	PartPos  int64
}

// Has reports whether the event (xid, pos) was consumed.
func (d *Done) Has(xid uint64, pos int64) bool {
	if d.Snapshot.Visible(xid) {
		return true
	}
	if _, ok := slices.BinarySearch(d.XIDs, xid); ok {
		return true
	}
	return xid == d.PartXID && pos <= d.PartPos
}

func (d *Done) String() string {
	var b strings.Builder
	b.WriteString(d.Snapshot.String())
	b.WriteByte(';')
	for i, x := range d.XIDs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(x, 10))
	}
	b.WriteByte(';')
	if d.PartXID != 0 {
		b.WriteString(strconv.FormatUint(d.PartXID, 10) + "/" + strconv.FormatInt(d.PartPos, 10))
	}
	return b.String()
}

func parseDone(s string) (*Done, error) {
	f := strings.Split(s, ";")
	if len(f) != 3 {
		return nil, errors.New("want snapshot;xids;part")
	}
	snap, err := cursor.ParseSnapshot(f[0])
	if err != nil {
		return nil, err
	}
	d := &Done{Snapshot: snap}
	if f[1] != "" {
		for _, x := range strings.Split(f[1], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("transaction id %q", x)
			}
			if len(d.XIDs) > 0 && v <= d.XIDs[len(d.XIDs)-1] {
				return nil, errors.New("transaction ids not ascending")
			}
			d.XIDs = append(d.XIDs, v)
		}
	}
	if f[2] != "" {
		x, p, ok := strings.Cut(f[2], "/")
		var err1, err2 error
		d.PartXID, err1 = strconv.ParseUint(x, 10, 64)
		d.PartPos, err2 = strconv.ParseInt(p, 10, 64)
		if !ok || err1 != nil || err2 != nil || d.PartXID == 0 {
			return nil, fmt.Errorf("part %q", f[2])
		}
	}
	return d, nil
}

// syncRead is the progress of the initial snapshot read: every event visible in
// Snapshot up to After (in log order) was delivered.
type syncRead struct {
	Snapshot *cursor.Snapshot
	After    cursor.Cursor
}

// isZero reports whether c is the zero Checkpoint.
func (c Checkpoint) isZero() bool { return c.LSN == 0 && c.Skip == 0 && c.Sync == nil && c.Done == nil }

// equal reports whether two checkpoints name the same point (the same
// String), without rendering them.
func (c Checkpoint) equal(o Checkpoint) bool {
	if c.LSN != o.LSN || c.Skip != o.Skip || (c.Sync == nil) != (o.Sync == nil) || (c.Done == nil) != (o.Done == nil) {
		return false
	}
	if c.Sync != nil && (c.Sync.After.TransactionID != o.Sync.After.TransactionID || c.Sync.After.Position != o.Sync.After.Position || !snapshotEqual(c.Sync.Snapshot, o.Sync.Snapshot)) {
		return false
	}
	if d, e := c.Done, o.Done; d != nil && (d.PartXID != e.PartXID || d.PartPos != e.PartPos ||
		!slices.Equal(d.XIDs, e.XIDs) || !snapshotEqual(d.Snapshot, e.Snapshot)) {
		return false
	}
	return true
}

func snapshotEqual(a, b *cursor.Snapshot) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Xmin == b.Xmin && a.Xmax == b.Xmax && slices.Equal(a.Xip, b.Xip)
}

// String renders the checkpoint as stored in the checkpoints table:
// "LSN|skip", during a snapshot read "LSN|skip|snapshot|tx|pos", either
// followed by "|" and Done's form "snapshot;xid,…;partxid/partpos" when
// Done is set (an empty string for the zero Checkpoint).
func (c Checkpoint) String() string {
	if c.isZero() {
		return ""
	}
	s := c.LSN.String() + "|" + strconv.FormatInt(c.Skip, 10)
	if c.Sync != nil {
		s += "|" + c.Sync.Snapshot.String() + "|" + strconv.FormatUint(c.Sync.After.TransactionID, 10) +
			"|" + strconv.FormatInt(c.Sync.After.Position, 10)
	}
	if c.Done != nil {
		s += "|" + c.Done.String()
	}
	return s
}

// ParseCheckpoint parses String's form. An empty string is the zero
// Checkpoint. A malformed one fails with a *pgdcb.InvalidArgumentError.
func ParseCheckpoint(s string) (Checkpoint, error) {
	if s == "" {
		return Checkpoint{}, nil
	}
	bad := func(why string) (Checkpoint, error) {
		return Checkpoint{}, &pgdcb.InvalidArgumentError{Name: "logical checkpoint", Reason: fmt.Sprintf("%q: %s", s, why)}
	}
	f := strings.Split(s, "|")
	if len(f) < 2 || len(f) > 6 || len(f) == 4 {
		return bad("want 2, 3, 5 or 6 fields separated by |")
	}
	var (
		c   Checkpoint
		err error
	)
	if c.LSN, err = pglogrepl.ParseLSN(f[0]); err != nil {
		return bad("LSN: " + err.Error())
	}
	if c.Skip, err = strconv.ParseInt(f[1], 10, 64); err != nil || c.Skip < 0 {
		return bad("skip count")
	}
	if len(f) == 3 || len(f) == 6 {
		d, err := parseDone(f[len(f)-1])
		if err != nil {
			return bad("done: " + err.Error())
		}
		c.Done = d
	}
	if len(f) >= 5 {
		snap, err := cursor.ParseSnapshot(f[2])
		if err != nil {
			return bad("snapshot: " + err.Error())
		}
		sy := &syncRead{Snapshot: snap}
		if sy.After.TransactionID, err = strconv.ParseUint(f[3], 10, 64); err != nil {
			return bad("sync transaction id")
		}
		if sy.After.Position, err = strconv.ParseInt(f[4], 10, 64); err != nil {
			return bad("sync position")
		}
		c.Sync = sy
	}
	return c, nil
}

// SwitchError: a reader cannot leave the logical decoding mode exactly at
// this checkpoint (Checkpoint.Detached), because it does not name every
// event consumed beyond its log-order cursor. Reason says why and what to do.
type SwitchError struct {
	Checkpoint string
	Reason     string
}

func (e *SwitchError) Error() string {
	return "pgdcb: logical: cannot switch to tail reads exactly at checkpoint " + e.Checkpoint + ": " + e.Reason
}

// IsDetached reports whether c is a detached checkpoint (Detached): a
// consumed set without a slot position.
func (c Checkpoint) IsDetached() bool {
	return c.LSN == 0 && c.Skip == 0 && c.Sync == nil && c.Done != nil
}

// Detached is what a reader leaving the logical decoding mode keeps of c:
// the events consumed beyond the log-order cursor stored with c (every
// event at or before that cursor was consumed), as a Done without a slot
// position (LSN 0, rendered "0/0|0|…"). A tail reader skips those events;
// Open, given a detached checkpoint, starts over with a new slot after its
// cursor and leaves them out, as when it resynchronises a lost slot. The
// zero Checkpoint and a detached one are returned as they are. It fails
// with a *SwitchError when c names no consumed set (stored while a backlog
// was in flight) or a resynchronisation is in progress.
func (c Checkpoint) Detached() (Checkpoint, error) {
	switch {
	case c.isZero() || c.IsDetached():
		return c, nil
	case c.Sync != nil && c.Done != nil:
		return c, &SwitchError{Checkpoint: c.String(), Reason: "a resynchronisation from the log is in progress; run the reader in logical mode until it has finished, or Reset it"}
	case c.Sync != nil:
		return Checkpoint{Done: syncDone(c.Sync)}, nil
	case c.Done == nil:
		return c, &SwitchError{Checkpoint: c.String(), Reason: "it names no consumed set (stored while a backlog was in flight); run the reader in logical mode until it has caught up, or Reset it"}
	}
	return Checkpoint{Done: c.Done}, nil
}

// syncDone is the consumed set of an initial snapshot read in progress:
// the events visible in its snapshot up to After.
func syncDone(sy *syncRead) *Done {
	s, a := sy.Snapshot, sy.After
	snap := &cursor.Snapshot{Xmin: max(min(s.Xmin, a.TransactionID), 1)}
	snap.Xmax = max(min(s.Xmax, a.TransactionID), snap.Xmin)
	for _, x := range s.Xip {
		if x >= snap.Xmin && x < snap.Xmax {
			snap.Xip = append(snap.Xip, x)
		}
	}
	d := &Done{Snapshot: snap}
	if a.TransactionID != 0 && s.Visible(a.TransactionID) {
		d.PartXID, d.PartPos = a.TransactionID, a.Position
	}
	return d
}

// Consumed reports whether c proves the event (xid, pos) consumed beyond
// the cursor stored with it: named by its consumed set (Done), or read by
// its snapshot read in progress. false when c does not know.
func (c Checkpoint) Consumed(xid uint64, pos int64) bool {
	if c.Done != nil && c.Done.Has(xid, pos) {
		return true
	}
	return c.Sync != nil && c.Sync.Snapshot.Visible(xid) &&
		cursor.Compare(xid, pos, c.Sync.After.TransactionID, c.Sync.After.Position) <= 0
}

// Beyond reports whether d may name an event after the log point c (false
// once a reader's cursor has passed every transaction d names).
func (d *Done) Beyond(c cursor.Cursor) bool {
	if d.Snapshot.Xmax > c.TransactionID || (d.PartXID != 0 && cursor.Compare(d.PartXID, d.PartPos, c.TransactionID, c.Position) > 0) {
		return true
	}
	return len(d.XIDs) > 0 && d.XIDs[len(d.XIDs)-1] >= c.TransactionID
}
