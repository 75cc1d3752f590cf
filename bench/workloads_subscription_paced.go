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
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
	"github.com/pgdcb/pgdcb/tags"
)

// Paced live delivery (issue #24, docs/SUBSCRIPTIONS.md "Liveness limits"):
//
//   - subscription/live/2000ev-s and …/held-other-db: pacedWriters writers
//     append one event each call, paced so that together they append
//     lagRate (2,000) events/s, while one subscription (LISTEN/NOTIFY) runs
//     for the whole workload; the second holds a transaction with an xid open
//     in another database of the cluster for the whole workload. Reported,
//     over every event delivered during the measured repetitions: the
//     delivery latency from just before the Append call to the handler
//     (append → handler, p50/p99/max), the same from the moment Append
//     returned (commit acknowledged → handler; 0 when the handler had the
//     event first), and the rate reached. The floor is the same paced Append of
//     an event the subscription does not match. The two workloads are the
//     baseline of each other in the same run. Not in --quick: a pace and a
//     p99 need seconds of repetitions (run them with --only and --duration).
//   - subscription/live/1000ev-s and …/held-other-db: the same at halfRate
//     (1,000) events/s, with more of the machine's CPU idle (the machine CPU
//     column).
//
// The appends and the subscription go through a store in the default
// configuration (groupedStore: group commit on); the per-call path's own
// append p99 at this pace was most of the delivery's p99 on a 2-core
// machine.
func init() {
	register(
		Workload{Name: "subscription/live/2000ev-s", Group: "subscription", Writers: pacedWriters, Prepare: preparePacedLive(lagRate, false)},
		Workload{Name: "subscription/live/2000ev-s/held-other-db", Group: "subscription", Writers: pacedWriters, Prepare: preparePacedLive(lagRate, true)},
		Workload{Name: "subscription/live/1000ev-s", Group: "subscription", Writers: pacedWriters, Prepare: preparePacedLive(halfRate, false)},
		Workload{Name: "subscription/live/1000ev-s/held-other-db", Group: "subscription", Writers: pacedWriters, Prepare: preparePacedLive(halfRate, true)},
	)
}

const (
	// pacedWriters is enough concurrency for lagRate on a loaded 2-core
	// machine, where 8 writers fell short of it.
	pacedWriters = 24
	// halfRate is the pace of the …/1000ev-s rows: lagRate's half.
	halfRate       = lagRate / 2
	pacedType      = "BenchPaced"
	pacedFloorType = "BenchPacedFloor"
)

// pacedEvent carries the time just before its Append call.
func pacedEvent(typ string, w int, seq int64) pgdcb.Event {
	return pgdcb.Event{Type: typ, Tags: tags.MustParseSet("paced=" + strconv.Itoa(w)),
		Data: json.RawMessage(`{"t0":` + strconv.FormatInt(time.Now().UnixNano(), 10) + `,"w":` + strconv.Itoa(w) +
			`,"seq":` + strconv.FormatInt(seq, 10) + `}`)}
}

// ackMeter pairs each event's acknowledgement (Append returned) with its
// delivery (the handler has it), in whichever order they come, and records
// ack → delivery (0 when the delivery came first).
type ackMeter struct {
	mu      sync.Mutex
	first   map[[2]int64]ackMark
	samples []time.Duration
	// calls are the measured Append calls' own times (call → acknowledged):
	// no event is delivered before its commit, so their percentiles bound
	// append → handler from below on the same machine at the same pace.
	calls []time.Duration
}

// call records one measured Append call's time.
func (m *ackMeter) call(d time.Duration) {
	m.mu.Lock()
	m.calls = append(m.calls, d)
	m.mu.Unlock()
}

// callPercentilesMs is the p50 and p99 of the recorded Append calls, in
// milliseconds.
func (m *ackMeter) callPercentilesMs() (p50, p99 float64) {
	p50, p99, _, _ = latencyMs(&m.mu, &m.calls)
	return p50, p99
}

type ackMark struct {
	at  time.Time
	ack bool
}

func (m *ackMeter) mark(w, seq int64, ack bool, at time.Time, record bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]int64{w, seq}
	o, ok := m.first[k]
	if !ok {
		m.first[k] = ackMark{at: at, ack: ack}
		return
	}
	delete(m.first, k)
	if !record {
		return
	}
	if ack { // delivered before the acknowledgement
		m.samples = append(m.samples, 0)
	} else {
		m.samples = append(m.samples, max(0, at.Sub(o.at)))
	}
}

func preparePacedLive(rate int, held bool) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		st, err := groupedStore(env) // the default configuration: group commit on
		if err != nil {
			return nil, err
		}
		sub, err := subscription.New(st, query.New(query.Item{Types: []string{pacedType}}),
			&subscription.Config{Name: "bench-paced"})
		if err != nil {
			return nil, err
		}
		release := func() error { return nil }
		if held {
			if release, err = holdXact(ctx, env, otherDatabase); err != nil {
				return nil, err
			}
		}
		var (
			mu        sync.Mutex
			samples   []time.Duration
			measuring atomic.Bool
			nappend   atomic.Int64
			ndeliv    atomic.Int64
			chk       orderCheck
			acks      = &ackMeter{first: map[[2]int64]ackMark{}}
			runErr    = make(chan error, 1)
		)
		bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
		go func() {
			runErr <- sub.Run(bg, cursor.Start, func(_ context.Context, b subscription.Batch) error {
				now := time.Now()
				if err := chk.add(b.Events); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				for _, e := range b.Events {
					var d struct{ T0, W, Seq int64 }
					if err := json.Unmarshal(e.Data, &d); err != nil {
						return err
					}
					ndeliv.Add(1)
					rec := measuring.Load()
					if rec {
						samples = append(samples, now.Sub(time.Unix(0, d.T0)))
					}
					acks.mark(d.W, d.Seq, false, now, rec)
				}
				return nil
			})
		}()
		var stopOnce sync.Once
		var stopErr error
		stop := func() error {
			stopOnce.Do(func() {
				cancel()
				if err := <-runErr; !errors.Is(err, context.Canceled) {
					stopErr = fmt.Errorf("subscription.Run: %w", err)
				}
				_ = release()
				_ = st.Close(context.Background())
			})
			return stopErr
		}
		latMs := func() (p50, p99, mx float64, n int) { return latencyMs(&mu, &samples) }
		ackMs := acks.percentilesMs
		what := "no other transaction open"
		if held {
			what = "a transaction holding an xid open in another database for the whole workload"
		}
		op, floor := pacedAppends(rate, st, acks, &measuring, &nappend, stop)
		return &Plan{
			Start:     func() { measuring.Store(true) },
			Op:        op,
			Floor:     floor,
			FloorName: "Append alone, same pace (an event the subscription does not match)",
			Check: func(context.Context, *Counters) error {
				// Every appended event is delivered, once, in order, before the
				// subscription stops (a held horizon would fail this).
				deadline := time.Now().Add(liveTimeout)
				for ndeliv.Load() < nappend.Load() && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				err := stop()
				if a, d := nappend.Load(), ndeliv.Load(); a != d {
					return fmt.Errorf("SELF-CHECK FAILED: %d events appended, %d delivered%s", a, d, horizonHint(ctx, env))
				}
				if _, _, _, n := latMs(); n == 0 {
					return errors.New("SELF-CHECK FAILED: no delivery measured")
				}
				return err
			},
			Notes: func(c *Counters, elapsed float64) string {
				p50, p99, mx, n := latMs()
				a50, a99 := ackMs()
				c50, c99 := acks.callPercentilesMs()
				return fmt.Sprintf("append → handler p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d events); commit acknowledged → handler p50 %.1f ms, p99 %.1f ms; the Append call alone (→ acknowledged) p50 %.1f ms, p99 %.1f ms; %.0f ev/s reached of %d targeted; %s",
					p50, p99, mx, n, a50, a99, c50, c99, float64(c.Successes.Load())/elapsed, rate, what)
			},
			Extra: func(c *Counters, elapsed float64) map[string]any {
				p50, p99, mx, n := latMs()
				a50, a99 := ackMs()
				c50, c99 := acks.callPercentilesMs()
				return map[string]any{"delivery_p50_ms": p50, "delivery_p99_ms": p99, "delivery_max_ms": mx, "deliveries": n,
					"ack_to_handler_p50_ms": a50, "ack_to_handler_p99_ms": a99, "append_call_p50_ms": c50, "append_call_p99_ms": c99,
					"target_events_per_s": rate, "held_transaction_other_db": held}
			},
		}, nil
	}
}

// pacedAppends returns the Op and Floor of the paced live-delivery rows: Op
// appends a pacedType event at rate events/s in all and marks its ack
// time in acks (recorded while measuring) and counts it in nappend; Floor
// appends, at the same pace, an event the reader does not match. An append
// error stops the reader (stop) and the run.
func pacedAppends(rate int, store *eventstore.Store, acks *ackMeter, measuring *atomic.Bool, nappend *atomic.Int64, stop func() error) (op, floor OpFunc) {
	pace := &pacer{interval: time.Second / time.Duration(rate)}
	pace.next.Store(time.Now().UnixNano())
	floorPace := &pacer{interval: time.Second / time.Duration(rate)}
	floorPace.next.Store(time.Now().UnixNano())
	op = func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
		if err := pace.wait(ctx); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if _, err := store.Append(ctx, []pgdcb.Event{pacedEvent(pacedType, w, seq)}); err != nil {
			_ = stop()
			return 0, err
		}
		now, rec := time.Now(), measuring.Load()
		acks.mark(int64(w), seq, true, now, rec)
		if rec {
			acks.call(now.Sub(t0))
		}
		nappend.Add(1)
		c.Successes.Add(1)
		return 1, nil
	}
	floor = func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
		if err := floorPace.wait(ctx); err != nil {
			return 0, err
		}
		if _, err := store.Append(ctx, []pgdcb.Event{pacedEvent(pacedFloorType, w, seq)}); err != nil {
			_ = stop()
			return 0, err
		}
		return 1, nil
	}
	return op, floor
}

// latencyMs copies samples under mu and returns their p50, p99 and maximum
// in milliseconds, and their number.
func latencyMs(mu *sync.Mutex, samples *[]time.Duration) (p50, p99, mx float64, n int) {
	mu.Lock()
	c := append([]time.Duration(nil), *samples...)
	mu.Unlock()
	if len(c) == 0 {
		return 0, 0, 0, 0
	}
	for _, d := range c {
		mx = max(mx, float64(d)/float64(time.Millisecond))
	}
	return percentileMs(c, 50), percentileMs(c, 99), mx, len(c)
}

// percentilesMs is the p50 and p99 of the recorded acknowledgement times,
// in milliseconds.
func (m *ackMeter) percentilesMs() (p50, p99 float64) {
	p50, p99, _, _ = latencyMs(&m.mu, &m.samples)
	return p50, p99
}
