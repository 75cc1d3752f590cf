package eventstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/storekit"
)

// Append appends events unconditionally, in one transaction. It still takes the
// events' keys in shared mode, so concurrent conditional appends see it.
//
// A failure after the request may have reached the server (a lost connection,
// a terminated backend, a context that ended during the call) is settled
// before Append returns (docs/FAULTS.md, "Settled outcomes"): the store makes
// sure the server process that ran the call can no longer commit and looks
// the call up. Committed: Append returns its result as if nothing had
// happened. Not committed: the store sends it again while ctx is live, else
// returns a *NotAppliedError. Only when the server cannot be reached for
// Config.SettleTimeout does the error match pgdcb.ErrOutcomeUnknown: the
// events may or may not be stored, and retrying is safe only for events
// that carry ids (Event.ID: a retry of a stored batch then fails with
// pgdcb.ErrIdempotent). Every other error means nothing was stored.
func (s *Store) Append(ctx context.Context, events []pgdcb.Event) (pgdcb.AppendResult, error) {
	ctx, t := s.startAppend(ctx, events, nil, false)
	res, err := s.appendPool(ctx, events, nil)
	t.endAppend(len(events), res, err)
	return res, err
}

// appendPool runs one append as its own (implicit) transaction on a pooled
// connection and tells a certain failure from an unknown outcome.
func (s *Store) appendPool(ctx context.Context, events []pgdcb.Event, cond *appendif.Condition) (pgdcb.AppendResult, error) {
	events, err := s.prepare(events)
	if err != nil {
		return pgdcb.AppendResult{}, err
	}
	if !s.bg.enter(true) {
		return pgdcb.AppendResult{}, fmt.Errorf("pgdcb: append: %w", pgdcb.ErrClosed)
	}
	defer s.bg.leave()
	if subjects, err := storekit.MarkedSubjects(events); err != nil || subjects != nil {
		if err != nil {
			return pgdcb.AppendResult{}, err
		}
		return s.appendSealed(ctx, nil, events, subjects, cond)
	}
	if !s.cfg.GroupCommitDisabled {
		return s.group.appendGrouped(ctx, events, cond)
	}
	return s.group.appendOne(ctx, events, cond)
}

// AppendTx is Append in the caller's transaction. The transaction must be READ
// COMMITTED and the append must be its first write (and its only append): append
// first, then write your other tables in the same transaction. Otherwise it
// fails with an error matching pgdcb.ErrTransactionState.
//
// Call Notify after the transaction commits to wake tailing readers at once;
// without it they see the events at their next poll.
//
// The outcome is the transaction's: use CommitTx (or pass the error of your
// own Commit through MarkOutcomeUnknown) to learn whether a failed commit may
// have committed. The store does not settle it (it does not own the COMMIT, and
// the transaction may have written other tables): give the events ids
// (Event.ID) and, after an unknown commit, run the transaction again; the
// append then fails with pgdcb.ErrIdempotent if the first one committed.
func (s *Store) AppendTx(ctx context.Context, tx pgx.Tx, events []pgdcb.Event) (res pgdcb.AppendResult, err error) {
	ctx, t := s.startAppend(ctx, events, nil, true)
	defer func() { t.endAppend(len(events), res, err) }()
	events, err = s.prepare(events)
	if err != nil {
		return pgdcb.AppendResult{}, err
	}
	return s.appendTx(ctx, tx, events, nil)
}

// AppendIf appends events only if cond holds (see appendif.Condition): it fails
// with an *appendif.IdempotentError (pgdcb.ErrIdempotent) when the idempotency
// query matches any event, else with an *appendif.ConditionFailedError
// (pgdcb.ErrConditionFailed) when an event matching FailIfEventsMatch exists
// that cond.After has not seen. Either way nothing is appended.
//
// The guarantee holds whatever the concurrency: when AppendIf commits, no event
// matching FailIfEventsMatch exists that the decision did not see.
//
// A failed send is settled as for Append (a resend is decided afresh against
// cond). As with Append, an error matching pgdcb.ErrOutcomeUnknown (the
// settle budget ran out) means the append may have committed. Retrying the
// same AppendIf is safe when cond carries an idempotency query that the
// events match (or the events carry ids): a retry of a committed append then
// fails with pgdcb.ErrIdempotent.
func (s *Store) AppendIf(ctx context.Context, events []pgdcb.Event, cond appendif.Condition) (res pgdcb.AppendResult, err error) {
	ctx, t := s.startAppend(ctx, events, &cond, false)
	defer func() { t.endAppend(len(events), res, err) }()
	if err := cond.Validate(); err != nil {
		return pgdcb.AppendResult{}, err
	}
	cond = storekit.ExpandCondition(s.cfg.Upcasters, cond)
	return s.appendPool(ctx, events, &cond)
}

// AppendIfTx is AppendIf in the caller's transaction, with AppendTx's rules. A
// failed condition does not abort the transaction, but the caller should roll
// it back: nothing was appended.
func (s *Store) AppendIfTx(ctx context.Context, tx pgx.Tx, events []pgdcb.Event, cond appendif.Condition) (res pgdcb.AppendResult, err error) {
	ctx, t := s.startAppend(ctx, events, &cond, true)
	defer func() { t.endAppend(len(events), res, err) }()
	if err := cond.Validate(); err != nil {
		return pgdcb.AppendResult{}, err
	}
	cond = storekit.ExpandCondition(s.cfg.Upcasters, cond)
	events, err = s.prepare(events)
	if err != nil {
		return pgdcb.AppendResult{}, err
	}
	return s.appendTx(ctx, tx, events, &cond)
}

// appendTx sends an append (validated events) in the caller's transaction,
// sealing its personal fields first when it has some.
func (s *Store) appendTx(ctx context.Context, tx pgx.Tx, events []pgdcb.Event, cond *appendif.Condition) (pgdcb.AppendResult, error) {
	subjects, err := storekit.MarkedSubjects(events)
	if err != nil {
		return pgdcb.AppendResult{}, err
	}
	if subjects != nil {
		return s.appendSealed(ctx, tx, events, subjects, cond)
	}
	return s.appendEvents(ctx, tx, events, cond, false, uuid.Nil)
}

// appendEvents sends one append (validated events). autocommit says the
// statement is its own transaction, so a failure after sending it leaves the
// outcome unknown; in a caller's transaction the caller's commit decides.
//
// id, unless uuid.Nil, is the call's id (see callID): the first event's
// event_id when the caller gave it none.
func (s *Store) appendEvents(ctx context.Context, db dbtx, events []pgdcb.Event, cond *appendif.Condition, autocommit bool, id uuid.UUID) (pgdcb.AppendResult, error) {
	var (
		status   string
		txID     *uint64
		pos      []int64
		conflict *int64
		at       int64
		err      error
	)
	locks := locksFor(s.cfg.Schema, events, cond, s.cfg.MaxLockKeys)
	if conn, ok := db.(*pgxpool.Conn); ok {
		// The store's own connection: the call written in binary format
		// by the store (wire.go).
		p := getWireParams()
		defer putWireParams(p)
		p.appendEventsWire(newWireCall(events, cond, id), locks)
		err = s.callRow(ctx, conn, &s.sql.appendEventsWire, p, func(cols [][]byte) error {
			st, tx, ps, c, t, err := appendRow(cols, 0)
			if st != nil {
				status = *st
			}
			txID, pos, conflict, at = tx, ps, c, t
			return err
		})
	} else {
		var occurred pgtype.Timestamptz
		err = db.QueryRow(ctx, s.sql.appendEvents, appendEventsArgs(events, cond, locks, id)...).
			Scan(&status, &txID, &pos, &conflict, &occurred)
		at = unixMicros(occurred)
	}
	if err != nil {
		if autocommit {
			return pgdcb.AppendResult{}, errOutcome("append", err)
		}
		return pgdcb.AppendResult{}, errf("append", err)
	}
	return appendOutcome(cond, status, txID, pos, conflict, at)
}

// unixMicros is a recorded time in microseconds since the Unix epoch, as
// cursor.Cursor.EventTime holds it: 0 for NULL or an infinite one.
func unixMicros(t pgtype.Timestamptz) int64 {
	if !t.Valid || t.InfinityModifier != pgtype.Finite {
		return 0
	}
	return t.Time.UnixMicro()
}

// recordedAt is the time unixMicros read (the zero time for 0).
func recordedAt(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// eventTime is a StoredEvent's OccurredAt as cursor.Cursor.EventTime holds
// it (0 for the zero time: not read).
func eventTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// afterTime is the p_after_at argument for cursor c: its event's recorded
// time, NULL (nil) when it carries none.
func afterTime(c *cursor.Cursor) *time.Time {
	if c == nil || c.EventTime == 0 {
		return nil
	}
	t := time.UnixMicro(c.EventTime)
	return &t
}

// appendEventsArgs are append_events' arguments ($1 to $17) for one append
// (validated events) whose keys are locks; id as for appendEvents.
func appendEventsArgs(events []pgdcb.Event, cond *appendif.Condition, locks lockSet, id uuid.UUID) []any {
	n := len(events)
	types := make([]string, n)
	tagCounts := make([]int32, n)
	var allTags []string
	data := make([]string, n)
	meta := make([]*string, n)
	ids := make([]pgtype.UUID, n)
	for i, e := range events {
		types[i] = e.Type
		tagCounts[i] = int32(e.Tags.Len())
		allTags = append(allTags, e.Tags.Strings()...)
		data[i] = string(e.Data)
		if len(e.Metadata) > 0 {
			m := string(e.Metadata)
			meta[i] = &m
		}
		if e.ID != [16]byte{} {
			ids[i] = pgtype.UUID{Bytes: e.ID, Valid: true}
		}
	}
	if n > 0 && !ids[0].Valid && id != uuid.Nil {
		ids[0] = pgtype.UUID{Bytes: id, Valid: true}
	}
	if allTags == nil {
		allTags = []string{}
	}
	checks := checksFor(cond)
	var afterTx uint64
	var afterPos int64
	var afterSnap *string
	if cond != nil && cond.After != nil {
		afterTx, afterPos = cond.After.TransactionID, cond.After.Position
		afterSnap = afterSnapshotArg(cond.After)
	}
	return []any{
		types, tagCounts, allTags, data, meta, ids,
		locks.keys, locks.excl,
		checks.idem, checks.typeCounts, checks.types, checks.tagCounts, checks.tags,
		afterTx, afterPos, afterSnap, afterTime(afterOf(cond)),
	}
}

// afterOf is cond's cursor, nil when none.
func afterOf(cond *appendif.Condition) *cursor.Cursor {
	if cond == nil {
		return nil
	}
	return cond.After
}

// appendOutcome is the result of an append_events call that returned; at is
// its occurred_at (unixMicros).
func appendOutcome(cond *appendif.Condition, status string, txID *uint64, pos []int64, conflict *int64, at int64) (pgdcb.AppendResult, error) {
	switch {
	case status == "ok" && txID != nil:
		return pgdcb.AppendResult{TransactionID: *txID, Positions: pos, OccurredAt: recordedAt(at)}, nil
	case status == "idempotent" && cond != nil && conflict != nil:
		return pgdcb.AppendResult{}, &appendif.IdempotentError{Query: cond.Idempotency, ExistingPosition: *conflict}
	case status == "condition" && cond != nil && conflict != nil:
		return pgdcb.AppendResult{}, &appendif.ConditionFailedError{Query: cond.FailIfEventsMatch, After: cond.After, ConflictPosition: *conflict}
	}
	return pgdcb.AppendResult{}, fmt.Errorf("pgdcb: append: unexpected status %q from append_events", status)
}
