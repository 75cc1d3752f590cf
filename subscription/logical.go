package subscription

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/logical"
)

// closeTimeout bounds closing the logical stream after ctx ended.
const closeTimeout = 10 * time.Second

// slotMetricEvery bounds how often RunLogical reads its slot's retained WAL
// for Config.Tracer's TraceSlot (a projection reads it every HeartbeatInterval).
const slotMetricEvery = 5 * time.Second

// RunLogical is Run in the logical decoding mode (Config.Logical): the
// events come from the subscription's replication slot in COMMIT order
// (each transaction's events in position order), so a transaction left open
// in the same database does not hold them back. It resumes after from, the
// Batch.Checkpoint last stored with tail (its Batch.Cursor); the zero
// Checkpoint starts over from tail: a new slot, and first every event after
// tail committed before it, by a snapshot read of the log (with cursor.Start
// every event; with a cursor of Run, the events Run had not delivered). A
// detached from (logical.Checkpoint.Detached, kept through a Run period)
// starts over after tail in the same way, leaving out the events it names
// (docs/SUBSCRIPTIONS.md "Cost and limits of the mode").
//
// Store Batch.Checkpoint and Batch.Cursor together, durably, before the
// handler returns: the server is then told that the stream may release the
// WAL before the checkpoint. Resuming from an older checkpoint than the last
// one handled resynchronises the slot from the log (every event after that
// checkpoint once, none skipped) when the checkpoint names what it consumed
// (logical.Checkpoint.Done), and fails with logical.ErrSlotLost when it does
// not. In this mode a batch may
// have no events: it only moves the checkpoint (at most once per
// PollInterval), so that the slot does not retain WAL while no matching
// event comes.
//
// Batch.Cursor is a log-order point before which every event was delivered
// (safe as an AppendIf After, and what WaitFor and Processed follow); it
// waits for open transactions although delivery does not. A lost slot is
// resynchronised (docs/SUBSCRIPTIONS.md "A lost slot"); RunLogical returns
// an error matching logical.ErrSlotLost when from cannot be resynchronised,
// ctx's error when ctx ends, a *HandlerError when the handler failed. Other
// failures (the server went away) are retried with backoff from the last
// checkpoint handled.
func (s *Subscription) RunLogical(ctx context.Context, from logical.Checkpoint, tail cursor.Cursor, h Handler) (err error) {
	if h == nil {
		return errors.New("pgdcb: subscription.RunLogical: nil handler")
	}
	if s.cfg.Logical == nil {
		return &pgdcb.InvalidArgumentError{Name: "subscription.Config.Logical", Reason: "is nil: RunLogical needs the logical decoding mode"}
	}
	store, ok := s.store.(*eventstore.Store)
	if !ok {
		return &pgdcb.InvalidArgumentError{Name: "subscription store", Reason: fmt.Sprintf("%T: the logical decoding mode needs an *eventstore.Store", s.store)}
	}
	tail.Snapshot = nil
	s.prog.start(tail)
	defer func() { s.prog.stop(err) }()
	var (
		rd       *logical.Reader
		failures int
		lastCall time.Time
		lastSlot time.Time
	)
	closeReader := func() {
		if rd != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			_ = rd.Close(cctx)
			cancel()
			rd = nil
		}
	}
	defer closeReader()
	fail := func(what string, err error) error {
		closeReader()
		failures++
		s.tr.readerError(ctx, s.cfg.Name, err)
		d := retry.Delay(failures, s.cfg.RetryMin, s.cfg.RetryMax)
		s.cfg.Logger.WarnContext(ctx, "pgdcb: subscription: "+what+" failed", "name", s.cfg.Name, "err", err, "retry_in", d)
		return retry.Sleep(ctx, d)
	}
	for {
		if rd == nil {
			var err error
			rd, err = logical.Open(ctx, store, s.cfg.Name, s.q, from, tail, s.cfg.Logical)
			if err != nil {
				rd = nil
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, logical.ErrSlotLost) || errors.Is(err, pgdcb.ErrInvalidArgument) {
					return fmt.Errorf("pgdcb: subscription %q: %w", s.cfg.Name, err)
				}
				if err := fail("opening the logical stream", err); err != nil {
					return err
				}
				continue
			}
			if why := rd.Resynced(); why != "" {
				s.cfg.Logger.WarnContext(ctx, "pgdcb: subscription: replication slot lost; resynchronising from the log", "name", s.cfg.Name, "slot", rd.Slot(), "why", why)
			}
		}
		b, err := rd.Next(ctx, s.cfg.BatchSize, s.cfg.PollInterval)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := fail("logical read", err); err != nil {
				return err
			}
			continue
		}
		failures = 0
		if !b.Moved(from, tail) || (len(b.Events) == 0 && time.Since(lastCall) < s.cfg.PollInterval) {
			continue
		}
		var l Lag
		if n := len(b.Events); n > 0 {
			l.Behind = max(0, time.Since(b.Events[n-1].OccurredAt))
			s.tr.lag(ctx, s.cfg.Name, l)
		}
		lastCall = time.Now()
		if err := s.tr.batch(ctx, s.cfg.Name, len(b.Events), tail, func(ctx context.Context) error {
			return h(ctx, Batch{Events: b.Events, Cursor: b.Tail, Lag: l, Checkpoint: b.Checkpoint})
		}); err != nil {
			s.tr.readerError(ctx, s.cfg.Name, err)
			return &HandlerError{Cursor: tail, Checkpoint: from, Err: err}
		}
		from, tail = b.Checkpoint, b.Tail
		s.prog.advance(tail)
		if err := rd.Confirm(ctx, from); err != nil {
			// Stored by the handler already; the server learns the
			// position at the next confirmation.
			closeReader()
			continue
		}
		if s.tr.s != nil && time.Since(lastSlot) >= slotMetricEvery {
			lastSlot = time.Now()
			st, err := logical.GetSlotStatus(ctx, store.Pool(), rd.Slot())
			if err != nil {
				s.cfg.Logger.WarnContext(ctx, "pgdcb: subscription: reading the slot's status failed", "name", s.cfg.Name, "err", err)
				continue
			}
			s.tr.s.TraceSlot(ctx, s.cfg.Name, SlotStatus{RetainedBytes: st.RetainedBytes, Lost: st.WALStatus == "lost"})
		}
	}
}
