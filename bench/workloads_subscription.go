package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/horizon"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
	"github.com/pgdcb/pgdcb/tags"
)

// Subscription workloads (package subscription, docs/SUBSCRIPTIONS.md):
//
//   - subscription/catchup/<size>: a whole backlog delivered to a no-op
//     handler, against a bare ReadTail loop over the same backlog. The backlog
//     is the read fixture of that size, so each catch-up workload is placed
//     right after the read workloads of its size and reuses their table
//     (10k under --quick, 1M in the full run).
//   - subscription/live/notify and subscription/live/poll-50ms: append one
//     event, wait until the handler has it; latency per call is
//     append → handler, against Append alone.
func init() {
	afterFixture(Workload{Name: "subscription/catchup/1M", Group: "subscription", Writers: 1, Fixture: 1_000_000, Prepare: prepareCatchUp})
	afterFixture(Workload{Name: "subscription/catchup/10k", Group: "subscription", Writers: 1, Fixture: 10_000, Quick: true, Prepare: prepareCatchUp})
	register(
		Workload{Name: "subscription/live/notify", Group: "subscription", Writers: 1, Quick: true, Prepare: prepareLive(false, time.Second)},
		Workload{Name: "subscription/live/poll-50ms", Group: "subscription", Writers: 1, Quick: true, Prepare: prepareLive(true, 50*time.Millisecond)},
	)
}

// afterFixture registers w right after the last workload with the same
// Fixture, so that it runs in that shared table instead of building it again
// (a 1M table takes ~25 s); at the end when there is none.
func afterFixture(w Workload) {
	at := len(registry)
	for i, r := range registry {
		if r.Fixture == w.Fixture {
			at = i + 1
		}
	}
	registry = append(registry[:at], append([]Workload{w}, registry[at:]...)...)
}

const (
	catchUpBatch = 1000 // subscription.Config.BatchSize's default
	// catchUpTimeout bounds one catch-up: a transaction held open anywhere in
	// the cluster holds the tailing horizon below the backlog and stalls it.
	catchUpTimeout = 2 * time.Minute
)

// orderCheck verifies that events come in log order, each exactly once: the
// (transaction_id, position) of every event must be strictly greater than the
// previous one's; with the count equal to the backlog's, that is every event
// once.
type orderCheck struct {
	last cursor.Cursor
	n    int
}

func (o *orderCheck) add(evs []pgdcb.StoredEvent) error {
	for _, e := range evs {
		tx, pos := e.TransactionID, e.Position
		if o.n > 0 && (tx < o.last.TransactionID || tx == o.last.TransactionID && pos <= o.last.Position) {
			return fmt.Errorf("SELF-CHECK FAILED: event (%d, %d) delivered after (%d, %d): out of order or twice",
				tx, pos, o.last.TransactionID, o.last.Position)
		}
		o.last = cursor.Cursor{TransactionID: tx, Position: pos}
		o.n++
	}
	return nil
}

func (o *orderCheck) done(want int) error {
	if o.n != want {
		return fmt.Errorf("SELF-CHECK FAILED: %d events delivered, want %d", o.n, want)
	}
	return nil
}

// horizonHint names the backend holding the tailing horizon, for errors.
func horizonHint(ctx context.Context, env *Env) string {
	h, ok, err := horizon.Oldest(context.WithoutCancel(ctx), env.Pool)
	if err != nil || !ok {
		return ""
	}
	return fmt.Sprintf(" (horizon held by pid %d, %s, since %s: %.80q)", h.PID, h.ApplicationName, h.XactStart.Format(time.RFC3339), h.Query)
}

// prepareCatchUp: one call delivers the whole fixture, from the zero cursor,
// to a handler that only checks order; the floor reads the same events with a
// bare ReadTail loop in batches of the same size, with the same check.
func prepareCatchUp(_ context.Context, env *Env) (*Plan, error) {
	n := env.Fixture
	q := query.All()
	// Polling only: with LISTEN every call would open a connection of its
	// own, which a catch-up does not need (it reads on while batches are full).
	sub, err := subscription.New(env.Store, q, &subscription.Config{BatchSize: catchUpBatch, NotifyDisabled: true})
	if err != nil {
		return nil, err
	}
	return &Plan{
		Op: func(ctx context.Context, _ int, _ int64, c *Counters) (int, error) {
			ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
			defer cancel()
			var (
				chk    orderCheck
				chkErr error
			)
			err := sub.Run(ctx, cursor.Cursor{}, func(_ context.Context, b subscription.Batch) error {
				if chkErr = chk.add(b.Events); chkErr != nil {
					return chkErr
				}
				if chk.n >= n {
					cancel()
				}
				return nil
			})
			if chkErr != nil {
				return 0, chkErr
			}
			if !errors.Is(err, context.Canceled) || chk.n < n {
				if errors.Is(err, context.DeadlineExceeded) {
					err = fmt.Errorf("%w after %d of %d events%s", err, chk.n, n, horizonHint(ctx, env))
				}
				return 0, fmt.Errorf("subscription.Run: %w", err)
			}
			if err := chk.done(n); err != nil {
				return 0, err
			}
			c.Successes.Add(1)
			return n, nil
		},
		Floor: func(ctx context.Context, _ int, _ int64, _ *Counters) (int, error) {
			deadline := time.Now().Add(catchUpTimeout)
			var chk orderCheck
			cur := cursor.Cursor{}
			for chk.n < n {
				tb, err := env.Store.ReadTail(ctx, q, cur, catchUpBatch)
				if err != nil {
					return 0, err
				}
				if err := chk.add(tb.Events); err != nil {
					return 0, err
				}
				cur = tb.Cursor
				if len(tb.Events) == 0 {
					if time.Now().After(deadline) {
						return 0, fmt.Errorf("ReadTail stalled after %d of %d events%s", chk.n, n, horizonHint(ctx, env))
					}
					time.Sleep(2 * time.Millisecond) // horizon held: back off, as the subscriptions do
				}
			}
			if err := chk.done(n); err != nil {
				return 0, err
			}
			return n, nil
		},
		FloorName: "ReadTail loop",
		Check: func(_ context.Context, c *Counters) error {
			if c.Successes.Load() == 0 {
				return errors.New("SELF-CHECK FAILED: no catch-up completed")
			}
			return nil
		},
		Notes: func(*Counters, float64) string {
			return fmt.Sprintf("whole %s backlog per call, batches of %d, no-op handler", sizeName(n), catchUpBatch)
		},
	}, nil
}

const (
	liveType      = "BenchLive"
	liveFloorType = "BenchLiveFloor"
	// liveTimeout bounds the wait for one delivery (see catchUpTimeout).
	liveTimeout = 2 * time.Minute
)

// liveEvent is the event of one live call: its seq in the data, so the
// handler can say which call it belongs to.
func liveEvent(typ string, seq int64) pgdcb.Event {
	return pgdcb.Event{Type: typ, Tags: tags.MustParseSet("live=1"),
		Data: json.RawMessage(`{"seq":` + strconv.FormatInt(seq, 10) + `,"note":"benchmark payload"}`)}
}

// prepareLive: a subscription to the workload's event type runs for the whole
// workload (with LISTEN, or polling only every poll); one call appends an
// event and waits until the handler has it, so the call's latency is
// append → handler. The floor is Append of the same event alone (another type,
// which the subscription does not match). Self-check: every appended event is
// delivered once, in order (the handler hands each seq over; the call
// requires its own).
//
// The Plan has no close hook: the subscription stops in Check, or when a call
// (or the floor) fails, or with the run's context.
func prepareLive(pollOnly bool, poll time.Duration) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		sub, err := subscription.New(env.Store, query.New(query.Item{Types: []string{liveType}}),
			&subscription.Config{Name: "bench-live", PollInterval: poll, NotifyDisabled: pollOnly})
		if err != nil {
			return nil, err
		}
		var (
			delivered = make(chan int64, 1024)
			ndeliv    atomic.Int64
			nappend   atomic.Int64
			runErr    = make(chan error, 1)
		)
		sctx, cancel := context.WithCancel(ctx)
		var stopOnce sync.Once
		var stopErr error
		stop := func() error {
			stopOnce.Do(func() {
				cancel()
				if err := <-runErr; !errors.Is(err, context.Canceled) {
					stopErr = fmt.Errorf("subscription.Run: %w", err)
				}
			})
			return stopErr
		}
		go func() {
			runErr <- sub.Run(sctx, cursor.Cursor{}, func(ctx context.Context, b subscription.Batch) error {
				for _, e := range b.Events {
					var d struct{ Seq int64 }
					if err := json.Unmarshal(e.Data, &d); err != nil {
						return err
					}
					ndeliv.Add(1)
					select {
					case delivered <- d.Seq:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				return nil
			})
		}()
		// Deliver a first event before measuring (the warm-up then lets the
		// LISTEN connection settle).
		first := int64(-1)
		if _, err := env.Store.Append(ctx, []pgdcb.Event{liveEvent(liveType, first)}); err != nil {
			_ = stop()
			return nil, err
		}
		nappend.Add(1)
		select {
		case got := <-delivered:
			if got != first {
				_ = stop()
				return nil, fmt.Errorf("SELF-CHECK FAILED: first delivery was seq %d, want %d", got, first)
			}
		case <-time.After(liveTimeout):
			_ = stop()
			return nil, fmt.Errorf("the first event was not delivered within %s%s", liveTimeout, horizonHint(ctx, env))
		}
		fail := func(err error) (int, error) {
			_ = stop()
			return 0, err
		}
		mode := "LISTEN/NOTIFY, poll " + poll.String()
		if pollOnly {
			mode = "polling only, every " + poll.String()
		}
		return &Plan{
			Op: func(ctx context.Context, _ int, seq int64, c *Counters) (int, error) {
				if _, err := env.Store.Append(ctx, []pgdcb.Event{liveEvent(liveType, seq)}); err != nil {
					return fail(err)
				}
				nappend.Add(1)
				t := time.NewTimer(liveTimeout)
				defer t.Stop()
				select {
				case got := <-delivered:
					if got != seq {
						return fail(fmt.Errorf("SELF-CHECK FAILED: delivered seq %d, want %d (lost, duplicated or out of order)", got, seq))
					}
				case err := <-runErr:
					runErr <- err // for stop
					return fail(fmt.Errorf("subscription stopped: %w", err))
				case <-t.C:
					return fail(fmt.Errorf("SELF-CHECK FAILED: event %d not delivered within %s%s", seq, liveTimeout, horizonHint(ctx, env)))
				case <-ctx.Done():
					return fail(ctx.Err())
				}
				c.Successes.Add(1)
				return 1, nil
			},
			Floor: func(ctx context.Context, _ int, seq int64, _ *Counters) (int, error) {
				if _, err := env.Store.Append(ctx, []pgdcb.Event{liveEvent(liveFloorType, seq)}); err != nil {
					return fail(err)
				}
				return 1, nil
			},
			FloorName: "Append alone",
			Check: func(_ context.Context, c *Counters) error {
				err := stop()
				if a, d := nappend.Load(), ndeliv.Load(); a != d {
					return fmt.Errorf("SELF-CHECK FAILED: %d events appended, %d delivered", a, d)
				}
				if c.Successes.Load() == 0 {
					return errors.New("SELF-CHECK FAILED: no event delivered")
				}
				return err
			},
			Notes: func(*Counters, float64) string {
				return "latency = append → handler; " + mode
			},
		}, nil
	}
}
