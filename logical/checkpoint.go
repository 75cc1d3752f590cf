package logical

import (
	"fmt"
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
	// slot was created (the initial snapshot read); nil afterwards.
	Sync *Sync
}

// Sync is the progress of the initial snapshot read: every event visible in
// Snapshot up to After (in log order) was delivered.
type Sync struct {
	Snapshot *cursor.Snapshot
	After    cursor.Cursor
}

// IsZero reports whether c is the zero Checkpoint.
func (c Checkpoint) IsZero() bool { return c.LSN == 0 && c.Skip == 0 && c.Sync == nil }

// Equal reports whether two checkpoints name the same point.
func (c Checkpoint) Equal(o Checkpoint) bool { return c.String() == o.String() }

// String renders the checkpoint as stored in the checkpoints table:
// "LSN/skip" or, during the initial read, "LSN/skip/snapshot/tx/pos"
// (an empty string for the zero Checkpoint).
func (c Checkpoint) String() string {
	if c.IsZero() {
		return ""
	}
	s := c.LSN.String() + "|" + strconv.FormatInt(c.Skip, 10)
	if c.Sync != nil {
		s += "|" + c.Sync.Snapshot.String() + "|" + strconv.FormatUint(c.Sync.After.TransactionID, 10) +
			"|" + strconv.FormatInt(c.Sync.After.Position, 10)
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
	if len(f) != 2 && len(f) != 5 {
		return bad("want 2 or 5 fields separated by |")
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
	if len(f) == 5 {
		snap, err := cursor.ParseSnapshot(f[2])
		if err != nil {
			return bad("snapshot: " + err.Error())
		}
		sy := &Sync{Snapshot: snap}
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
