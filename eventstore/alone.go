package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
)

// tryCallAlone is tryCall for a group of one member, r: append_events'
// call (the per-call path's, one function call with its arguments) with
// r's keys tried first (statements.appendAloneWire), instead of append_group's.
// It decides exactly what append_group decides for one member: the same
// keys, tried the same way, then the same misuse checks, key locks, checks
// and insert (the text both functions share, sql/functions/_append.sql);
// it costs less client and server CPU (docs/GROUPCOMMIT.md, "A group of
// one"). When a key was busy it returns the busy keys, and nothing ran.
func (s *Store) tryCallAlone(ctx context.Context, conn *pgxpool.Conn, r *groupReq) ([]groupResult, map[int64]bool, error) {
	var (
		busy     []int64
		status   *string
		txID     *uint64
		pos      []int64
		conflict *int64
		at       int64
	)
	p := getWireParams()
	defer putWireParams(p)
	p.appendEventsWire(newWireCall(r.events, r.cond, r.id), r.locks)
	err := s.callRow(ctx, conn, &s.sql.appendAloneWire, p, func(cols [][]byte) error {
		if len(cols) != 6 {
			return errWireFormat
		}
		var err error
		if busy, err = colInt8Array(cols[0]); err != nil {
			return err
		}
		status, txID, pos, conflict, at, err = appendRow(cols, 1)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(busy) > 0 {
		return nil, busySet(busy), nil
	}
	st := "<none>"
	if status != nil {
		st = *status
		res, err := appendOutcome(r.cond, st, txID, pos, conflict, at)
		if err == nil || errors.Is(err, pgdcb.ErrIdempotent) || errors.Is(err, pgdcb.ErrConditionFailed) {
			return []groupResult{{res: res, err: err}}, nil, nil
		}
	}
	// Cannot happen (no key was busy, so append_events ran and answered);
	// the call committed, so say so, as tryCall does.
	err = &pgdcb.OutcomeUnknownError{Op: "append", Err: fmt.Errorf("unexpected status %q from append_events", st)}
	return []groupResult{{err: err}}, nil, nil
}

// busySet is the set of the busy keys a try returned.
func busySet(busy []int64) map[int64]bool {
	set := make(map[int64]bool, len(busy))
	for _, k := range busy {
		set[k] = true
	}
	return set
}
