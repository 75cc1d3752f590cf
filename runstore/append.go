package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// AppendEvent implements StateStore. It is one eventstore.AppendIf:
//
//   - idempotency query {run_id=R, idempotency_key=K}: a duplicate, racing or
//     not, finds the committed event (the check holds the key's exclusive
//     lock) and gets its runSeq back with Idempotent=true;
//   - condition FailIf({run_id=R}, decision): runSeq = last+1 commits only if
//     no event of the run appeared that the decision did not see; otherwise
//     the store reads the run's last runSeq again and retries.
//
// An append whose outcome is unknown (the connection was lost around its
// commit, see pgdcb.ErrOutcomeUnknown) is retried with the same runSeq: the
// idempotency query tells whether it committed, and the event is stored once.
// If the retries cannot reach the server before ctx ends (or after
// MaxAppendAttempts), the error matches pgdcb.ErrOutcomeUnknown; calling
// AppendEvent again with the same event settles it.
//
// The decision is the process's hint for the run (its own last append), so a
// single writer per run pays one round trip; for a run it has not seen (or a
// stale hint) a read of the run's last runSeq costs one more.
func (s *Store) AppendEvent(ctx context.Context, ev CanonicalEngineEvent) (AppendResult, error) {
	var retries int
	t := s.cfg.Tracer
	if t == nil {
		return s.appendEvent(ctx, ev, &retries)
	}
	start := time.Now()
	ctx = t.TraceRunAppendStart(ctx, TraceData{RunID: ev.RunID, EventType: ev.EventType})
	res, err := s.appendEvent(ctx, ev, &retries)
	t.TraceRunAppendEnd(ctx, TraceData{RunID: ev.RunID, EventType: ev.EventType, Result: res,
		Retries: retries, Duration: time.Since(start), Err: err})
	return res, err
}

// appendEvent is AppendEvent; it counts its retries in *retries, for the
// Tracer.
func (s *Store) appendEvent(ctx context.Context, ev CanonicalEngineEvent, retries *int) (AppendResult, error) {
	ev, ts, err := s.prepare(ev)
	if err != nil {
		return AppendResult{}, err
	}
	runTag := tags.Must(tagRunID, ev.RunID)
	runQ := query.New(query.Item{Tags: mustSet(runTag)})
	idemTags := mustSet(runTag, tags.Must(tagIdempotencyKey, ev.IdempotencyKey))
	idemQ := query.New(query.Item{Tags: idemTags})
	id, err := uuid.Parse(ev.EventID)
	if err != nil {
		return AppendResult{}, invalid("eventId", "%v", err)
	}

	var (
		last  int64
		after *cursor.Cursor
	)
	if h, ok := s.cache.get(ev.RunID); ok {
		last, after = h.seq, &h.cur
	} else {
		// Not FailIf(runQ, nil) ("no event of the run at all") for an unseen
		// run: the core's check without a cursor scans from transaction 0,
		// a cost that grows with the log, where one read of the run's last
		// event is an index probe.
		var c cursor.Cursor
		if last, c, err = s.lastSeq(ctx, ev.RunID); err != nil {
			return AppendResult{}, err
		}
		after = &c
	}
	// uncertain is the first attempt whose outcome was unknown
	// (pgdcb.ErrOutcomeUnknown): the idempotency query settles it on retry.
	var uncertain error
	for attempt := 1; ; attempt++ {
		ev.RunSeq = last + 1
		data, err := json.Marshal(ev)
		if err != nil {
			return AppendResult{}, errfmt.Errorf("pgdcb: runstore: encode event: %w", err)
		}
		res, err := s.es.AppendIf(ctx, []pgdcb.Event{{
			Type:     ev.EventType,
			Tags:     ts,
			Data:     data,
			Metadata: json.RawMessage(marker),
			ID:       id,
		}}, appendif.FailIf(runQ, after).WithIdempotency(idemQ))
		var idem *appendif.IdempotentError
		switch {
		case err == nil:
			s.cache.put(ev.RunID, seqHint{seq: ev.RunSeq, cur: res.Cursor()}) // one event: its own
			return AppendResult{RunSeq: ev.RunSeq, Persisted: true}, nil
		case errors.As(err, &idem):
			seq, found, rerr := s.existingSeq(ctx, idemTags)
			if rerr != nil {
				return AppendResult{}, rerr
			}
			if !found {
				if idem.EventID != "" {
					return AppendResult{}, fmt.Errorf("%w: %s", ErrEventIDConflict, ev.EventID)
				}
				// Deleted by retention between the check and this read.
				return AppendResult{}, errfmt.Errorf("pgdcb: runstore: duplicate of an event deleted meanwhile: %w", err)
			}
			if uncertain != nil {
				// This call's own earlier attempt committed (or a duplicate
				// racing it did): either way the event is stored once.
				return AppendResult{RunSeq: seq, Persisted: true}, nil
			}
			return AppendResult{RunSeq: seq, Idempotent: true}, nil
		case errors.Is(err, pgdcb.ErrOutcomeUnknown) || (uncertain != nil && !errors.Is(err, pgdcb.ErrConditionFailed)):
			// The append may have committed: retry the same runSeq after the
			// same cursor; the idempotency query answers whether it did. A
			// retry that cannot reach the server leaves the outcome unknown.
			if uncertain == nil {
				uncertain = err
			}
			s.cache.drop(ev.RunID)
			*retries++
			if attempt >= s.cfg.MaxAppendAttempts || ctx.Err() != nil {
				return AppendResult{}, outcomeUnknown(ev, attempt, uncertain)
			}
			if serr := retry.Sleep(ctx, retry.Delay(attempt, time.Millisecond, 100*time.Millisecond)); serr != nil {
				return AppendResult{}, outcomeUnknown(ev, attempt, uncertain)
			}
		case errors.Is(err, pgdcb.ErrConditionFailed):
			s.cache.drop(ev.RunID)
			*retries++
			if attempt >= s.cfg.MaxAppendAttempts {
				return AppendResult{}, &sentinelError{ErrContention, fmt.Errorf(
					"runstore: append to run %q lost the race for a runSeq %d times: %w", ev.RunID, attempt, err)}
			}
			var c cursor.Cursor
			if last, c, err = s.lastSeq(ctx, ev.RunID); err != nil {
				return AppendResult{}, err
			}
			after = &c
		default:
			return AppendResult{}, errfmt.Errorf("pgdcb: runstore: append: %w", err)
		}
	}
}

// outcomeUnknown is AppendEvent's error when its outcome stays unknown; it
// matches ErrOutcomeUnknown and pgdcb.ErrOutcomeUnknown.
func outcomeUnknown(ev CanonicalEngineEvent, attempts int, err error) error {
	return &sentinelError{ErrOutcomeUnknown, &pgdcb.OutcomeUnknownError{
		Op:  fmt.Sprintf("pgdcb: runstore: append to run %q (idempotency key %q) after %d attempts", ev.RunID, ev.IdempotencyKey, attempts),
		Err: err}}
}

// lastSeq reads the run's last runSeq and a decision cursor covering it.
func (s *Store) lastSeq(ctx context.Context, runID string) (int64, cursor.Cursor, error) {
	var (
		snapText string
		c        cursor.Cursor
		seq      int64
	)
	if err := s.es.Pool().QueryRow(ctx, s.sql.lastSeq, runID).Scan(&snapText, &c.TransactionID, &c.Position, &seq, &c.EventTime); err != nil {
		return 0, cursor.Cursor{}, errfmt.Errorf("pgdcb: runstore: read last runSeq: %w", err)
	}
	snap, err := cursor.ParseSnapshot(snapText)
	if err != nil {
		return 0, cursor.Cursor{}, errfmt.Errorf("pgdcb: runstore: read last runSeq: %w", err)
	}
	c.Snapshot = snap
	return seq, c, nil
}

func (s *Store) existingSeq(ctx context.Context, idemTags tags.Set) (int64, bool, error) {
	var seq int64
	err := s.es.Pool().QueryRow(ctx, s.sql.existingSeq, idemTags.Strings()).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, errfmt.Errorf("pgdcb: runstore: read duplicate's runSeq: %w", err)
	}
	return seq, true, nil
}

func mustSet(ts ...tags.Tag) tags.Set {
	s, err := tags.NewSet(ts...)
	if err != nil {
		panic(err) // validated tags
	}
	return s
}
