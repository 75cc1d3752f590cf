package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/appendif"
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
//     the run's tag.
func init() {
	for _, n := range []int{1, 8} {
		register(Workload{Name: "runstore/append-event/new-run/w" + strconv.Itoa(n), Group: "runstore", Writers: n, Quick: true, Prepare: prepareAppendEvent(true)})
	}
	for _, n := range []int{1, 8} {
		register(Workload{Name: "runstore/append-event/run-per-writer/w" + strconv.Itoa(n), Group: "runstore", Writers: n, Quick: true, Prepare: prepareAppendEvent(false)})
	}
	register(Workload{Name: "runstore/fetch-events/10k", Group: "runstore", Writers: 1, Quick: true, Prepare: prepareFetchEvents})
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
				_, err := env.Store.AppendIf(ctx, []eventstore.Event{e}, appendif.FailIf(query.Tagged(nil, tag), nil))
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
	runQ := query.Tagged(nil, runstore.TagRunID+"="+fetchRun)
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
			evs, _, err := env.Store.ReadAll(ctx, runQ, &eventstore.ReadOptions{Limit: fetchPage})
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
