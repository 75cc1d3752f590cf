package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/tags"
)

// Runstore workloads (package runstore, docs/RUNSTORE.md):
//
//   - runstore/append-event/new-run/w{1,8}: AppendEvent of a RunStarted that
//     starts a new run every call (the run's last runSeq is unknown to the
//     process: one extra read);
//   - runstore/append-event/run-per-writer/w{1,8}: every writer appends to a
//     run of its own (the process knows the run's last runSeq: one AppendIf);
//
// both against eventstore AppendIf of one event with a condition on a tag of
// its own (ratio = AppendEvent / AppendIf), and
//
//   - runstore/fetch-events/10k: FetchEvents of a 1,000-event page of a run of
//     10,000 events among 100,000, against eventstore ReadAll of 1,000 events by
//     the run's tag;
//   - runstore/snapshot-lag/2000ev-s and …/held-xact: AppendEvent paced at
//     2,000 events/s while the snapshot projector runs, the second with a
//     transaction holding an xid open in another database of the cluster
//     for the whole workload (it holds the tailing horizon). Reported: the
//     snapshot lag (acknowledged append → GetSnapshot holds it) p50/p99 in
//     Notes and Extra, and the rate reached; the two are compared with each
//     other (no floor).
func init() {
	for _, n := range []int{1, 8} {
		register(Workload{Name: "runstore/append-event/new-run/w" + strconv.Itoa(n), Group: "runstore", Writers: n, Quick: true, Prepare: prepareAppendEvent(true)})
	}
	for _, n := range []int{1, 8} {
		register(Workload{Name: "runstore/append-event/run-per-writer/w" + strconv.Itoa(n), Group: "runstore", Writers: n, Quick: true, Prepare: prepareAppendEvent(false)})
	}
	register(Workload{Name: "runstore/fetch-events/10k", Group: "runstore", Writers: 1, Quick: true, Prepare: prepareFetchEvents})
	register(
		Workload{Name: "runstore/snapshot-lag/2000ev-s", Group: "runstore", Writers: lagWriters, Quick: true, Prepare: prepareSnapshotLag(false)},
		Workload{Name: "runstore/snapshot-lag/2000ev-s/held-xact", Group: "runstore", Writers: lagWriters, Quick: true, Prepare: prepareSnapshotLag(true)},
	)
}

const benchEmittedAt = "2026-01-01T00:00:00.000Z"

// runEvent is the run event every AppendEvent workload appends: about the
// size of benchEvent's payload.
func runEvent(runID, typ string, seq int64) runstore.CanonicalEngineEvent {
	return runstore.CanonicalEngineEvent{
		RunID:            runID,
		EventType:        typ,
		LogicalAttemptID: "1",
		EventData:        json.RawMessage(`{"n":` + strconv.FormatInt(seq, 10) + `,"amount":42,"note":"benchmark payload"}`),
		IdempotencyKey:   runstore.IdempotencyKey(runID, "", "1", typ+"-"+strconv.FormatInt(seq, 10), "v1"),
		EmittedAt:        benchEmittedAt,
	}
}

// prepareAppendEvent: AppendEvent on distinct runs (newRun: a new run per
// call; otherwise one run per writer). Every append must persist with the
// expected runSeq (1 for a new run, seq+1 in a writer's run): an idempotent
// outcome or a conflict fails the workload.
func prepareAppendEvent(newRun bool) func(context.Context, *Env) (*Plan, error) {
	return func(_ context.Context, env *Env) (*Plan, error) {
		rs, err := runstore.New(env.Store, nil)
		if err != nil {
			return nil, err
		}
		return &Plan{
			Op: func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
				run, typ, want := "w"+strconv.Itoa(w), "StepCompleted", seq+1
				if newRun {
					run, typ, want = "r"+strconv.Itoa(w)+"-"+strconv.FormatInt(seq, 10), "RunStarted", 1
				}
				res, err := rs.AppendEvent(ctx, runEvent(run, typ, seq))
				if errors.Is(err, pgdcb.ErrConditionFailed) {
					c.Conflicts.Add(1)
					return 0, fmt.Errorf("%w: %v", errNoConflictExpected, err)
				}
				if err != nil {
					return 0, err
				}
				if res.Idempotent || !res.Persisted {
					c.Idempotent.Add(1)
					return 0, fmt.Errorf("SELF-CHECK FAILED: a new event of run %s came back idempotent=%v persisted=%v (runSeq %d)", run, res.Idempotent, res.Persisted, res.RunSeq)
				}
				if res.RunSeq != want {
					return 0, fmt.Errorf("SELF-CHECK FAILED: run %s got runSeq %d, want %d", run, res.RunSeq, want)
				}
				c.Successes.Add(1)
				return 1, nil
			},
			// AppendIf of the same-sized event with a condition on a tag of
			// its own (nothing to conflict with), as runstore's
			// BenchmarkAppendEvent measures it.
			Floor: func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
				tag := "account=b" + strconv.Itoa(w) + "-" + strconv.FormatInt(seq, 10)
				e := benchEvent(w, seq)
				e.Tags = tags.MustParseSet(tag)
				_, err := env.Store.AppendIf(ctx, []pgdcb.Event{e}, appendif.FailIf(query.Tagged(nil, tag), nil))
				if errors.Is(err, pgdcb.ErrConditionFailed) {
					return 0, fmt.Errorf("%w: %v", errNoConflictExpected, err)
				}
				if err != nil {
					return 0, err
				}
				return 1, nil
			},
			FloorName: "AppendIf 1 event, own tag",
			Check: func(_ context.Context, c *Counters) error {
				if n, m := c.Conflicts.Load(), c.Idempotent.Load(); n != 0 || m != 0 {
					return fmt.Errorf("SELF-CHECK FAILED: %d conflicts, %d idempotent outcomes", n, m)
				}
				return nil
			},
		}, nil
	}
}

const (
	fetchRun       = "big"
	fetchRunEvents = 10_000
	fetchOthers    = 90 // other runs of 1,000 events each
	fetchPage      = 1000
)

// fillRuns inserts run events directly, in the shape AppendEvent writes them
// (tags run_id and idempotency_key, the whole event as data, the runstore
// marker as metadata): runs runs of per events each (runSeq 1..per), named
// prefix when runs is 1, else prefix-0, prefix-1, …. Setup only.
func fillRuns(ctx context.Context, env *Env, prefix string, runs, per int) error {
	// Sequential scan of generate_series; every index of events (GIN tags,
	// events_runstore_run_seq, …) maintained row by row.
	_, err := env.Pool.Exec(ctx, `INSERT INTO `+env.Q+`.events (type, tags, data, metadata, event_id)
		SELECT 'Tick', ARRAY['idempotency_key=k' || seq, 'run_id=' || run],
		       jsonb_build_object('runId', run, 'runSeq', seq, 'eventId', u::text, 'eventType', 'Tick',
		                          'eventData', jsonb_build_object('n', seq, 'note', 'benchmark payload'),
		                          'idempotencyKey', 'k' || seq, 'emittedAt', $4::text),
		       '{"runstore": "v1"}'::jsonb, u
		  FROM (SELECT CASE WHEN $2::int = 1 THEN $1::text ELSE $1::text || '-' || ((g - 1) / $3::int) END AS run,
		               (g - 1) % $3::int + 1 AS seq, gen_random_uuid() AS u
		          FROM generate_series(1, $2::int * $3::int) AS g) s`,
		prefix, runs, per, benchEmittedAt)
	return err
}

// prepareFetchEvents: a 1,000-event page (AfterSeq 0, 1000, …, 8000 in turn)
// of a 10,000-event run among 100,000 run events. Self-check: 1,000 events,
// runSeq after+1 … after+1000 in order.
func prepareFetchEvents(ctx context.Context, env *Env) (*Plan, error) {
	rs, err := runstore.New(env.Store, nil)
	if err != nil {
		return nil, err
	}
	if err := fillRuns(ctx, env, "other", fetchOthers, 1000); err != nil {
		return nil, err
	}
	if err := fillRuns(ctx, env, fetchRun, 1, fetchRunEvents); err != nil {
		return nil, err
	}
	if _, err := env.Pool.Exec(ctx, `VACUUM ANALYZE `+env.Q+`.events`); err != nil {
		return nil, err
	}
	runQ := query.Tagged(nil, "run_id="+fetchRun)
	return &Plan{
		Op: func(ctx context.Context, _ int, seq int64, _ *Counters) (int, error) {
			after := (seq % (fetchRunEvents/fetchPage - 1)) * fetchPage
			evs, err := rs.FetchEvents(ctx, fetchRun, &runstore.FetchOptions{AfterSeq: after, Limit: fetchPage})
			if err != nil {
				return 0, err
			}
			if len(evs) != fetchPage {
				return 0, fmt.Errorf("SELF-CHECK FAILED: FetchEvents returned %d events, want %d", len(evs), fetchPage)
			}
			for i, e := range evs {
				if e.RunSeq != after+int64(i)+1 {
					return 0, fmt.Errorf("SELF-CHECK FAILED: event %d of the page has runSeq %d, want %d", i, e.RunSeq, after+int64(i)+1)
				}
			}
			return len(evs), nil
		},
		// events_tags (GIN) for the run's 10,000 rows, sorted in log order,
		// the first 1,000 decoded.
		Floor: func(ctx context.Context, _ int, _ int64, _ *Counters) (int, error) {
			evs, _, err := env.Store.ReadAll(ctx, runQ, &pgdcb.ReadOptions{Limit: fetchPage})
			if err != nil {
				return 0, err
			}
			if len(evs) != fetchPage {
				return 0, fmt.Errorf("SELF-CHECK FAILED: ReadAll returned %d events, want %d", len(evs), fetchPage)
			}
			return len(evs), nil
		},
		FloorName: "ReadAll 1000 by tag",
		Notes: func(*Counters, float64) string {
			return "1,000-event pages of a 10k-event run among 100k run events"
		},
	}, nil
}

const (
	lagRate    = 2000 // target events/s of the snapshot-lag workloads
	lagWriters = 8
	lagRunLen  = 200 // events per run before a writer starts the next run
	// lagProbeTimeout bounds one probe: a snapshot that does not reach an
	// acknowledged append within it counts as this lag.
	lagProbeTimeout = 30 * time.Second
	// holdTimeout ends the held transaction server-side should the workload
	// fail before releasing it (idle_in_transaction_session_timeout).
	holdTimeout = 2 * time.Minute
)

// pacer spaces the calls of all writers to a fixed rate; a writer that falls
// behind by more than 100 ms does not burst to catch up.
type pacer struct {
	interval time.Duration
	next     atomic.Int64 // unix nanoseconds of the next slot
}

func (p *pacer) wait(ctx context.Context) error {
	now := time.Now().UnixNano()
	slot := p.next.Add(int64(p.interval)) - int64(p.interval)
	if slot < now-int64(100*time.Millisecond) {
		p.next.Store(now + int64(p.interval))
		return nil
	}
	if d := time.Duration(slot - now); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return nil
}

// lagAck is an acknowledged append: its run, runSeq and when AppendEvent
// returned.
type lagAck struct {
	run string
	seq int64
	at  time.Time
}

// lagProbe measures snapshot lag: it takes the latest acknowledged append,
// polls GetSnapshot of its run until the snapshot holds it, records the time
// from the acknowledgement, and starts over with the then latest append.
type lagProbe struct {
	rs      *runstore.Store
	latest  atomic.Pointer[lagAck]
	mu      sync.Mutex
	samples []time.Duration
	err     error
}

func (p *lagProbe) run(ctx context.Context) {
	var last *lagAck
	for ctx.Err() == nil {
		a := p.latest.Load()
		if a == nil || a == last {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		last = a
		for {
			snap, err := p.rs.GetSnapshot(ctx, a.run)
			if err != nil {
				if ctx.Err() == nil {
					p.mu.Lock()
					p.err = err
					p.mu.Unlock()
				}
				return
			}
			if snap != nil && snap.LastEventSeq >= a.seq {
				break
			}
			if time.Since(a.at) > lagProbeTimeout {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		p.mu.Lock()
		p.samples = append(p.samples, time.Since(a.at))
		p.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// prepareSnapshotLag: every call is one AppendEvent, paced so that all
// writers together append lagRate events/s (each writer to a run of its own,
// a new run every lagRunLen events); the snapshot projector runs for the whole
// workload, and a probe measures the snapshot lag. held: a transaction holds
// an xid open in another database from Prepare to Check. The projector and
// the probe use a pool of their own.
func prepareSnapshotLag(held bool) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		rs, err := runstore.New(env.Store, nil)
		if err != nil {
			return nil, err
		}
		pcfg := env.Pool.Config().Copy()
		pcfg.MaxConns = 4
		ppool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, err
		}
		pes, err := eventstore.New(ppool, &eventstore.Config{Schema: env.Schema})
		var prs *runstore.Store
		if err == nil {
			prs, err = runstore.New(pes, nil)
		}
		if err != nil {
			ppool.Close()
			return nil, err
		}
		release := func() error { return nil }
		if held {
			if release, err = holdXact(ctx, env, otherDatabase); err != nil {
				ppool.Close()
				return nil, err
			}
		}
		bg, stop := context.WithCancel(context.WithoutCancel(ctx))
		probe := &lagProbe{rs: prs}
		var (
			wg      sync.WaitGroup
			projErr atomic.Pointer[error]
		)
		wg.Go(func() {
			if err := prs.Projector().Run(bg); err != nil && bg.Err() == nil {
				projErr.Store(&err)
			}
		})
		wg.Go(func() {
			probe.run(bg)
			if bg.Err() == nil {
				_ = release() // the probe failed (the schema was dropped?): do not hold on
			}
		})
		var stopOnce sync.Once
		shutdown := func() {
			stopOnce.Do(func() {
				stop()
				wg.Wait()
				_ = release()
				ppool.Close()
			})
		}
		pace := &pacer{interval: time.Second / lagRate}
		pace.next.Store(time.Now().UnixNano())
		floorPace := &pacer{interval: time.Second / lagRate}
		floorPace.next.Store(time.Now().UnixNano())
		lagMs := func() (p50, p99, maxMs float64, n int) {
			probe.mu.Lock()
			defer probe.mu.Unlock()
			n = len(probe.samples)
			if n == 0 {
				return 0, 0, 0, 0
			}
			c := append([]time.Duration(nil), probe.samples...)
			sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
			return percentileMs(c, 50), percentileMs(c, 99), float64(c[n-1]) / float64(time.Millisecond), n
		}
		what := "no other transaction open"
		if held {
			what = "a transaction holding an xid open in another database for the whole workload"
		}
		return &Plan{
			Op: func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
				if err := pace.wait(ctx); err != nil {
					return 0, err
				}
				run := "lag-w" + strconv.Itoa(w) + "-" + strconv.FormatInt(seq/lagRunLen, 10)
				res, err := rs.AppendEvent(ctx, runEvent(run, "StepCompleted", seq))
				if err != nil {
					shutdown()
					return 0, err
				}
				if !res.Persisted || res.RunSeq != seq%lagRunLen+1 {
					shutdown()
					return 0, fmt.Errorf("SELF-CHECK FAILED: run %s: %+v, want runSeq %d persisted", run, res, seq%lagRunLen+1)
				}
				probe.latest.Store(&lagAck{run: run, seq: res.RunSeq, at: time.Now()})
				c.Successes.Add(1)
				return 1, nil
			},
			// The same pace of eventstore AppendIf (one event, a condition on a
			// tag of its own): the rate the core reaches on this machine.
			Floor: func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
				if err := floorPace.wait(ctx); err != nil {
					return 0, err
				}
				tag := "account=lag" + strconv.Itoa(w) + "-" + strconv.FormatInt(seq, 10)
				e := benchEvent(w, seq)
				e.Tags = tags.MustParseSet(tag)
				if _, err := env.Store.AppendIf(ctx, []pgdcb.Event{e}, appendif.FailIf(query.Tagged(nil, tag), nil)); err != nil {
					return 0, err
				}
				return 1, nil
			},
			FloorName: "AppendIf 1 event, own tag, same pace",
			Check: func(context.Context, *Counters) error {
				// At least one probe (a short run may end with one in flight).
				for deadline := time.Now().Add(lagProbeTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if _, _, _, n := lagMs(); n > 0 {
						break
					}
				}
				shutdown()
				if e := projErr.Load(); e != nil {
					return fmt.Errorf("snapshot projector: %w", *e)
				}
				if probe.err != nil {
					return fmt.Errorf("lag probe: %w", probe.err)
				}
				if _, _, _, n := lagMs(); n == 0 {
					return errors.New("SELF-CHECK FAILED: no lag sample")
				}
				return nil
			},
			Notes: func(c *Counters, elapsed float64) string {
				p50, p99, mx, n := lagMs()
				return fmt.Sprintf("snapshot lag p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d probes); %.0f ev/s reached of %d targeted; %s",
					p50, p99, mx, n, float64(c.Successes.Load())/elapsed, lagRate, what)
			},
			Extra: func(c *Counters, elapsed float64) map[string]any {
				p50, p99, mx, n := lagMs()
				return map[string]any{"lag_p50_ms": p50, "lag_p99_ms": p99, "lag_max_ms": mx, "lag_probes": n,
					"target_events_per_s": lagRate, "held_transaction": held}
			},
		}, nil
	}
}
