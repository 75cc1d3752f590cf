package eventstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
)

// Settling (docs/FAULTS.md, "Settled outcomes").
//
// An Append or AppendIf on the pool is one statement that is its own
// transaction. When it fails after its request may have reached the server (a
// lost connection, a context that ended in the middle of the call, a
// terminated backend), the store does not answer "outcome unknown" at once: it
// finds out what happened.
//
//  1. Identify. Every call carries an id on its first event: the caller's
//     Event.ID, or a UUID (version 7) the store assigns. (A caller that
//     gives the first event an id an earlier call of the same size stored
//     gets that call's result: its events are stored, once.) The events_event_id
//     unique index then finds the call's first event; its other events follow
//     it in the same transaction, in batch order (events_log_order). One index
//     entry per call, not per event.
//  2. Make sure it can no longer commit. On a fresh connection, the backend
//     that ran the call (its PID and client port, which the connection knows)
//     is terminated if it still exists, and waited for until it is gone
//     (pg_terminate_backend with a timeout). A crashed or restarted server has
//     ended it already. Once it is gone its transaction has committed or
//     never will.
//  3. Look it up on that connection: present → the call's result (positions,
//     transaction id), as if nothing had happened; absent → nothing was
//     written: the store sends the call again if the caller's context is still
//     live (with the same id), else answers with a definite error.
//
// Only a server that cannot be reached for the settle budget
// (Config.SettleTimeout, counted from the failure) leaves the outcome
// unknown.

// Defaults and bounds of the settle fields of Config.
const (
	// DefaultSettleTimeout is Config.SettleTimeout's default: long enough for
	// a routine restart or a crash recovery of a small server, short enough
	// that a dead server still fails the call within seconds.
	defaultSettleTimeout = 5 * time.Second
	// MaxSettleTimeout bounds Config.SettleTimeout.
	maxSettleTimeout = 5 * time.Minute
	// maxResends bounds how often one call is sent again after it settled
	// as absent (each resend met a dead connection again: the pool's idle
	// connections after a restart).
	maxResends = 8
)

// SettleStats counts the store's settling since it was created.
type SettleStats struct {
	// Settled is the number of calls (group members counted one by one)
	// whose outcome was unknown when their send failed and that the store
	// settled.
	Settled int64
	// Present: settled as committed (the caller got its result). Absent:
	// settled as not committed. Resent: absent calls sent again (a resend
	// that fails again is settled again and counted again).
	Present, Absent, Resent int64
	// Unknown: calls answered with pgdcb.ErrOutcomeUnknown because the
	// settle budget ran out (the server could not be reached).
	Unknown int64
	// Terminated: backends the store terminated while settling.
	Terminated int64
	// DeadConns: pooled connections found dead when the store acquired
	// them for an append (acquire.go), closed before anything was sent.
	DeadConns int64
	// NotSent: sends that failed before anything left the client
	// (pgconn.SafeToRetry) and were sent again on a fresh connection
	// without settling.
	NotSent int64
}

type settler struct {
	s *Store // the store it settles for

	settled, present, absent, resent, unknown, terminated, deadConns, notSent atomic.Int64
}

// SettleStats returns the settling counters.
func (s *Store) SettleStats() SettleStats {
	c := &s.settler
	return SettleStats{Settled: c.settled.Load(), Present: c.present.Load(), Absent: c.absent.Load(),
		Resent: c.resent.Load(), Unknown: c.unknown.Load(), Terminated: c.terminated.Load(),
		DeadConns: c.deadConns.Load(), NotSent: c.notSent.Load()}
}

// callID returns the id that identifies a call's writes: its first event's
// id when the caller gave one, else a fresh one (version 7: time-ordered,
// so that its index entry goes to the right edge of events_event_id).
// uuid.Nil when settling is off: nothing is added then.
func (st *settler) callID(events []pgdcb.Event) uuid.UUID {
	s := st.s
	if s.cfg.SettleDisabled {
		return uuid.Nil
	}
	if len(events) > 0 && events[0].ID != uuid.Nil {
		return events[0].ID
	}
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

// backend says which server process ran a call, to terminate it after the
// connection is lost: its PID, from the connection's start-up (the server's
// BackendKeyData message).
type backend struct {
	pid       uint32
	signalled bool // settle terminated it (counted once)
}

func backendOf(conn *pgxpool.Conn) backend {
	return backend{pid: conn.Conn().PgConn().PID()}
}

// settleCall is one call to look up: its id and its number of events.
type settleCall struct {
	id     uuid.UUID
	events []pgdcb.Event
}

// found is a call settled as present.
type found struct {
	ok  bool
	res pgdcb.AppendResult
}

// settle makes sure the backend b can no longer commit and looks the calls
// up, on fresh connections, until it has an answer or the settle budget runs
// out (then the error is not nil and every outcome stays unknown).
func (st *settler) settle(ctx context.Context, b backend, calls []settleCall) ([]found, error) {
	s := st.s
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.SettleTimeout)
	defer cancel()
	s.settler.settled.Add(int64(len(calls)))
	wait := 10 * time.Millisecond
	for {
		out, err := s.settler.settleOnce(sctx, &b, calls)
		if err == nil {
			return out, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-sctx.Done():
			t.Stop()
			s.settler.unknown.Add(int64(len(calls)))
			return nil, fmt.Errorf("settle budget %s ran out: %w", s.cfg.SettleTimeout, err)
		case <-t.C:
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// settleOnce is one try of settle, on one pooled connection.
func (st *settler) settleOnce(ctx context.Context, b *backend, calls []settleCall) ([]found, error) {
	s := st.s
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if conn.Conn().PgConn().PID() == b.pid {
		// The server restarted and handed the PID out again: the old
		// backend is gone (a connection to one backend cannot come back).
		b.pid = 0
	}
	if b.pid != 0 {
		// pg_stat_activity is a scan of the server's backend slots (no
		// table, no index). Only a client backend of this role is
		// terminated (the PID of a process that is gone may have been
		// given to another one; within the few seconds of a settle, and
		// with PIDs handed out in turn, that is a backend of the same
		// role only in theory). pg_terminate_backend with a timeout waits
		// until the process has exited, and returns false (with a
		// warning) if it has not within the timeout.
		var n, gone int
		err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE pg_terminate_backend(a.pid, 2000))
			FROM pg_stat_activity a
			WHERE a.pid = $1 AND a.backend_type = 'client backend' AND a.usename = current_user`,
			int64(b.pid)).Scan(&n, &gone)
		if err != nil {
			return nil, err
		}
		if n > 0 && !b.signalled {
			b.signalled = true
			s.settler.terminated.Add(1)
		}
		if n != gone {
			return nil, fmt.Errorf("backend %d still running", b.pid)
		}
	}
	ids := make([]uuid.UUID, len(calls))
	counts := make([]int32, len(calls))
	for i, c := range calls {
		ids[i], counts[i] = c.id, int32(len(c.events))
	}
	// The first event of each call by events_event_id (event_id = $1
	// implies the partial index's predicate), then its other events, which
	// follow it in its transaction, by an index range from its position.
	// The found events' types and ids are returned too: a call is present
	// only if they are its own (the first event's id may be an earlier
	// call's, stored in a group transaction followed by other members).
	rows, err := conn.Query(ctx, s.settler.settleLookupSQL(), ids, counts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]found, len(calls))
	for rows.Next() {
		var (
			i     int64
			tx    uint64
			pos   []int64
			types []string
			evIDs []pgtype.UUID
			at    pgtype.Timestamptz
		)
		if err := rows.Scan(&i, &tx, &pos, &types, &evIDs, &at); err != nil {
			return nil, err
		}
		if i < 1 || int(i) > len(calls) {
			return nil, fmt.Errorf("pgdcb: settle: call %d of %d", i, len(calls))
		}
		if !sameCall(calls[i-1], types, evIDs) {
			// The id is another call's (the caller gave the first event an
			// id already stored): this call could not have stored it again.
			// Absent: sent again, it gets ErrIdempotent.
			continue
		}
		out[i-1] = found{ok: true, res: pgdcb.AppendResult{TransactionID: tx, Positions: pos, OccurredAt: recordedAt(unixMicros(at))}}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, f := range out {
		if f.ok {
			s.settler.present.Add(1)
		} else {
			s.settler.absent.Add(1)
		}
	}
	return out, nil
}

// sameCall reports whether the events found from c's id (their types and
// ids, in log order) are c's own: as many, the same types, and the same ids
// where c's events carry one (the first always does).
func sameCall(c settleCall, types []string, ids []pgtype.UUID) bool {
	if len(types) != len(c.events) || len(ids) != len(c.events) {
		return false
	}
	for j, e := range c.events {
		if types[j] != e.Type {
			return false
		}
		want := e.ID
		if j == 0 {
			want = c.id
		}
		if want != uuid.Nil && (!ids[j].Valid || uuid.UUID(ids[j].Bytes) != want) {
			return false
		}
	}
	return true
}

// NotAppliedError is the answer to an Append or AppendIf whose send failed
// (Err) and that the store then found had not committed: nothing was
// written, and the same call may be sent again. The store sends it again
// itself while the call's context is live, so a caller sees it when the
// context ended (errors.Is(err, context.DeadlineExceeded) holds then) or
// after repeated failures.
type NotAppliedError struct {
	Err error
}

func (e *NotAppliedError) Error() string {
	return "pgdcb: append: not applied (settled after the call failed): " + e.Err.Error()
}

// Unwrap returns the failure of the send.
func (e *NotAppliedError) Unwrap() error { return e.Err }

// sendSettled sends one append as its own transaction on a pooled
// connection (sendFresh: a send that never left the client is sent again
// there) and, if its outcome is unknown, settles it, sending it again while
// it is absent and ctx live. id identifies the call (callID). A connection
// whose send has an unknown outcome is discarded (dead, or in an unknown
// state) before settling, so that the settling and a resend never wait for
// its place in the pool.
func (st *settler) sendSettled(ctx context.Context, events []pgdcb.Event, cond *appendif.Condition, id uuid.UUID) (pgdcb.AppendResult, error) {
	s := st.s
	for resend := 0; ; resend++ {
		var (
			res pgdcb.AppendResult
			b   backend
			err error
		)
		unsent := s.sendFresh(ctx, func(conn *pgxpool.Conn) error {
			if err := ctx.Err(); err != nil {
				return err // nothing was sent
			}
			if s.sendHook != nil {
				s.sendHook(conn)
			}
			b = backendOf(conn)
			res, err = s.appendEvents(ctx, conn, events, cond, true, id)
			if notSent(err) {
				return unwrapUnknown(err)
			}
			if errors.Is(err, pgdcb.ErrOutcomeUnknown) {
				discard(ctx, conn)
			}
			return nil
		})
		switch {
		case unsent != nil && resend > 0:
			// Nothing was sent this time, and the call was absent before.
			return pgdcb.AppendResult{}, &NotAppliedError{Err: unsent}
		case unsent != nil:
			return pgdcb.AppendResult{}, errf("append", unsent) // nothing was sent
		case err == nil || !errors.Is(err, pgdcb.ErrOutcomeUnknown) || s.cfg.SettleDisabled:
			return res, err
		}
		out, serr := s.settler.settle(ctx, b, []settleCall{{id: id, events: events}})
		if serr != nil {
			return pgdcb.AppendResult{}, &pgdcb.OutcomeUnknownError{Op: "append", Err: errors.Join(unwrapUnknown(err), serr)}
		}
		if out[0].ok {
			return out[0].res, nil
		}
		if ctx.Err() != nil || resend == maxResends {
			return pgdcb.AppendResult{}, &NotAppliedError{Err: withCtxErr(ctx, unwrapUnknown(err))}
		}
		s.settler.resent.Add(1)
	}
}

// withCtxErr adds ctx's error to err unless err carries it already.
func withCtxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// unwrapUnknown returns the cause of an unknown outcome.
func unwrapUnknown(err error) error {
	var u *pgdcb.OutcomeUnknownError
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}

// settleGroup settles the members of a group whose call on backend b failed
// with err (of unknown outcome): one termination, one lookup, then each
// member its answer. Absent members whose context is live are sent again,
// alone.
func (st *settler) settleGroup(ctx context.Context, b backend, batch []*groupReq, err error) {
	s := st.s
	if s.cfg.SettleDisabled {
		for _, r := range batch {
			r.finish(pgdcb.AppendResult{}, err)
		}
		return
	}
	calls := make([]settleCall, len(batch))
	for i, r := range batch {
		calls[i] = settleCall{id: r.id, events: r.events}
	}
	out, serr := s.settler.settle(ctx, b, calls)
	notify := false
	for i, r := range batch {
		switch {
		case serr != nil:
			r.finish(pgdcb.AppendResult{}, &pgdcb.OutcomeUnknownError{Op: "append", Err: errors.Join(unwrapUnknown(err), serr)})
		case out[i].ok:
			notify = true
			r.finish(out[i].res, nil)
		case r.ctx.Err() != nil:
			r.finish(pgdcb.AppendResult{}, &NotAppliedError{Err: withCtxErr(r.ctx, unwrapUnknown(err))})
		default:
			// Absent, and its caller still waits: the caller sends it
			// again (outcome, group.go), outside the sender's place,
			// which must never wait for a key.
			r.done <- groupResult{resend: true}
		}
	}
	if notify {
		s.Notify(ctx)
	}
}

// settleMember settles one member r whose send on backend b failed with err
// (of unknown outcome), on a sender's place: present, it gets its result;
// absent, a definite error, or, while its caller waits, the mark to be sent
// again by its caller (outcome, group.go), never here: a resend waits for
// its keys, and a sender's place must not.
func (st *settler) settleMember(b backend, r *groupReq, err error) groupResult {
	s := st.s
	out, serr := s.settler.settle(r.ctx, b, []settleCall{{id: r.id, events: r.events}})
	switch {
	case serr != nil:
		return groupResult{err: &pgdcb.OutcomeUnknownError{Op: "append", Err: errors.Join(unwrapUnknown(err), serr)}}
	case out[0].ok:
		s.Notify(r.ctx)
		return groupResult{res: out[0].res}
	case r.ctx.Err() != nil:
		return groupResult{err: &NotAppliedError{Err: withCtxErr(r.ctx, unwrapUnknown(err))}}
	}
	return groupResult{resend: true}
}

// awaitSettled waits for the answer of a queued call that a sender took
// after the caller's context ended: the sender settles it if its send
// fails. It gives up after the settle budget (and the caller reports an
// unknown outcome).
func (st *settler) awaitSettled(r *groupReq) (groupResult, bool) {
	s := st.s
	if s.cfg.SettleDisabled {
		select {
		case out := <-r.done:
			return out, true
		default:
			return groupResult{}, false
		}
	}
	t := time.NewTimer(s.cfg.SettleTimeout)
	defer t.Stop()
	select {
	case out := <-r.done:
		return out, true
	case <-t.C:
		s.settler.unknown.Add(1)
		return groupResult{}, false
	}
}

// discard takes conn out of the pool and closes it. After a send whose
// outcome is unknown the connection is dead or in an unknown state (a
// context that ended before anything was sent leaves it healthy), and
// settling terminates the backend by its PID: the connection must never
// serve another call. Release after discard is a no-op.
func discard(ctx context.Context, conn *pgxpool.Conn) {
	c := conn.Hijack()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = c.Close(cctx)
}

// settleLookupSQL finds calls by their ids ($1 uuid[]) and event counts ($2
// integer[]): per call found, its ordinal, transaction, positions, types,
// event ids and recorded time. TestSettleLookupPlanUsesTheIdIndex checks its
// plan.
func (st *settler) settleLookupSQL() string {
	s := st.s
	return `SELECT c.i, f.transaction_id, x.pos, x.types, x.ids, f.occurred_at
		FROM unnest($1::uuid[], $2::integer[]) WITH ORDINALITY AS c(id, n, i)
		JOIN ` + s.sql.events + ` f ON f.event_id = c.id
		CROSS JOIN LATERAL (SELECT array_agg(e.position ORDER BY e.position) AS pos,
				array_agg(e.type ORDER BY e.position) AS types,
				array_agg(e.event_id ORDER BY e.position) AS ids
			FROM (SELECT e.position, e.type, e.event_id FROM ` + s.sql.events + ` e
			 WHERE e.transaction_id = f.transaction_id AND e.position >= f.position
			 ORDER BY e.transaction_id, e.position LIMIT c.n) e) x`
}
