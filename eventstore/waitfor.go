package eventstore

import (
	"context"
	"time"

	"github.com/pgdcb/pgdcb/cursor"
)

// WaitFor's polling: from waitForPollMin, doubling, up to waitForPollMax.
const (
	waitForPollMin = 2 * time.Millisecond
	waitForPollMax = 50 * time.Millisecond
)

// WaitFor waits until the store's reads show the event at target's log
// point: read-your-writes when reads go to a standby (Config.ReadPool),
// typically with the cursor of the caller's own append
// (AppendResult.Cursor). After it returns, a Read, Project or Head on the
// read pool sees that event and every event committed before it on the
// primary (a standby makes commits visible in commit order). Only target's
// point counts; the start of the log is reached at once. Without a read
// pool it returns at once (the primary shows its own commits).
//
// It polls the read pool (2 ms, doubling up to 50 ms; one primary key probe
// each) and returns ctx's error when ctx ends first: bound the wait with a
// deadline. An event deleted by retention is never shown again: do not wait
// for one.
func (s *Store) WaitFor(ctx context.Context, target cursor.Cursor) error {
	if s.cfg.ReadPool == nil || (target.TransactionID == 0 && target.Position == 0) {
		return nil // reads go to the primary, which shows its own commits
	}
	// events_pkey (position), one row.
	sql := `SELECT EXISTS (SELECT FROM ` + s.sql.events + ` WHERE position = $2 AND transaction_id = $1::xid8)`
	delay := waitForPollMin
	for {
		var shown bool
		if err := s.ReadPool().QueryRow(ctx, sql, target.TransactionID, target.Position).Scan(&shown); err != nil {
			return errf("wait for", err)
		}
		if shown {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return errf("wait for", ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, waitForPollMax)
	}
}
