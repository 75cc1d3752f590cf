package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
)

// Group-commit workloads: group commit is the default (eventstore
// Config.GroupCommitDisabled turns it off; docs/GROUPCOMMIT.md), so the
// headline rows append/1ev/wN, appendif/distinct/wN and cycle/entity10/wN
// (registered in writeWorkloads) run on a grouped store and their per-call
// twins carry /no-group. Each grouped workload runs its operation on a store
// with grouping on and measures, in the same rounds (interleaved), the
// autocommit one-row INSERT floor and, as baselines, the same operation with
// grouping off and (for plain writes at more than one writer) the
// grouped-INSERT ceiling: the same rows INSERTed k at a time by as many
// writers as the committer has senders, k = writers ÷ senders (the group
// size the committer reaches when every writer waits). The notes give the
// group sizes and time queued (Store.GroupStats) over the measured
// repetitions.
//
//   - appendif/distinct/w{1,8,32,128}: AppendIf on a boundary of the
//     writer's own (prepareAppendIfDistinct's operation);
//   - append/1ev/w{1,8,32,128}: Append of one event;
//   - cycle/entity10/w{1,8,32}: the decision cycle: read an entity of
//     10 events (ReadAll), AppendIf after that read's cursor; with a
//     baseline whose store has Config.TypedReadsGeneric (the read, by type
//     and tag, planned once per connection);
//   - runstore/append-event/run-per-writer/w32: runstore AppendEvent,
//     each writer on a run of its own (registered here, after the reads).
//
// Reports written before these names (bench/results.json of 2026-11-25 and
// earlier) called the grouped rows group/… and the per-call rows by the
// plain names; loadResults renames them (legacyName).
func init() {
	register(Workload{Name: "runstore/append-event/run-per-writer/w32", Group: "runstore-grouped", Writers: 32, Quick: true,
		Prepare: prepareGrouped(32, runPerWriterOp, false)})
}

// groupedStore is the env's schema through a store with group commit on, the
// default (GroupSenders from --group-senders, every other setting the
// default too); env.Store has it off.
func groupedStore(env *Env) (*eventstore.Store, error) {
	return eventstore.New(env.Pool, &eventstore.Config{Schema: env.Schema, GroupSenders: env.GroupSenders})
}

// offBase is the writer offset of the grouping-off baseline, so that its
// boundaries (and runs) are not the grouped operation's.
const offBase = 100_000

// prepareGrouped builds a group workload from op(store, base): op on a
// grouped store (base 0) against the one-row INSERT floor, with op on the
// ungrouped env.Store (base offBase) as a baseline and, when ceiling, the
// grouped-INSERT ceiling.
func prepareGrouped(writers int, op func(st *eventstore.Store, base int) OpFunc, ceiling bool) func(context.Context, *Env) (*Plan, error) {
	return func(_ context.Context, env *Env) (*Plan, error) {
		gs, err := groupedStore(env)
		if err != nil {
			return nil, err
		}
		p := &Plan{
			Op:        op(gs, 0),
			Floor:     floorInsert1(env, nil),
			FloorName: "INSERT 1 row",
			Baselines: []Baseline{{Name: "grouping off", Op: op(env.Store, offBase)}},
			Check:     checkNoConflict,
		}
		if ceiling && writers > 1 {
			p.Baselines = append(p.Baselines, groupedInsertCeiling(env, gs, writers))
		}
		withGroupStats(p, gs)
		return p, nil
	}
}

// groupedInsertCeiling: the one-row floor's rows, INSERTed k per commit by
// as many writers as gs has senders, k = writers ÷ senders rounded up.
func groupedInsertCeiling(env *Env, gs *eventstore.Store, writers int) Baseline {
	senders := min(writers, gs.Config().GroupSenders)
	if senders <= 0 {
		senders = min(writers, eventstore.DefaultGroupSenders)
	}
	k := (writers + senders - 1) / senders
	return Baseline{Name: fmt.Sprintf("INSERT %d rows per commit", k), Op: insertBatch(env, env.Floor, k), Writers: senders}
}

// withGroupStats makes p report gs's GroupStats over the measured
// repetitions (Start snapshots them; the floor and the baselines do not use
// gs).
func withGroupStats(p *Plan, gs *eventstore.Store) {
	var before eventstore.GroupStats
	p.Start = func() { before = gs.GroupStats() }
	p.Notes = func(*Counters, float64) string {
		st := gs.GroupStats().Sub(before)
		var meanWait time.Duration
		if st.Queued > 0 {
			meanWait = st.QueueWait / time.Duration(st.Queued)
		}
		return fmt.Sprintf("grouping: %.1f appends/commit (%d groups, %d alone, largest %d, %d retried); queued %d, wait mean %s max %s",
			st.AppendsPerCommit(), st.Groups, st.Alone, st.MaxAppends, st.Retried, st.Queued,
			meanWait.Round(time.Microsecond), st.MaxQueueWait.Round(time.Microsecond))
	}
	p.Extra = func(*Counters, float64) map[string]any {
		st := gs.GroupStats().Sub(before)
		hist := map[string]int64{}
		for _, b := range st.QueueWaits {
			name := "le_" + b.Max.String()
			if b.Max == math.MaxInt64 {
				name = "longer"
			}
			hist[name] = b.Count
		}
		return map[string]any{
			"appends_per_commit": st.AppendsPerCommit(), "groups": st.Groups, "grouped": st.Grouped,
			"alone": st.Alone, "max_appends": st.MaxAppends, "retried": st.Retried, "queued": st.Queued,
			"queue_wait_ms": st.QueueWait.Seconds() * 1000, "max_queue_wait_ms": st.MaxQueueWait.Seconds() * 1000,
			"queue_waits": hist,
		}
	}
}

// Decision-cycle fixture: every writer has cycleEntities entities of its
// own, each of cycleEvents events of type BenchEvent tagged entity=c<n>.
const (
	cycleEntities = 50
	cycleEvents   = 10
	cycleType     = "BenchEvent"
)

// prepareCycle: writer w cycles over its entities; one call reads the
// entity's 10 events (ReadAll, one statement) and appends one event after
// that read's cursor, on the entity's boundary. The appended event is of
// another type than the query's, so every entity keeps its 10 events and
// every read returns exactly 10 (checked); the condition still takes the
// entity's key exclusively and checks the rows since the cursor.
func prepareCycle(writers int) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		gs, err := groupedStore(env)
		if err != nil {
			return nil, err
		}
		n := writers * cycleEntities
		if _, err := env.Pool.Exec(ctx, `INSERT INTO `+env.Q+`.events (type, tags, data)
			SELECT $1, ARRAY['entity=c' || (g % $2::int)], jsonb_build_object('n', g, 'amount', 42, 'note', 'benchmark payload')
			  FROM generate_series(0, $2::int * $3::int - 1) AS g`, cycleType, n, cycleEvents); err != nil {
			return nil, fmt.Errorf("filling the entities: %w", err)
		}
		if _, err := env.Pool.Exec(ctx, `VACUUM ANALYZE `+env.Q+`.events`); err != nil {
			return nil, err
		}
		cycle := func(st *eventstore.Store) OpFunc {
			return func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
				entity := "entity=c" + strconv.Itoa(w*cycleEntities+int(seq%cycleEntities))
				q := query.Tagged([]string{cycleType}, entity)
				evs, cur, err := st.ReadAll(ctx, q, nil)
				if err != nil {
					return 0, err
				}
				if len(evs) != cycleEvents {
					return 0, fmt.Errorf("SELF-CHECK FAILED: %s has %d events, want %d", entity, len(evs), cycleEvents)
				}
				_, err = st.AppendIf(ctx, []pgdcb.Event{benchEvent(w, seq, entity)}, appendif.FailIf(q, &cur))
				if errors.Is(err, pgdcb.ErrConditionFailed) {
					c.Conflicts.Add(1)
					return 0, fmt.Errorf("%w: %v", errNoConflictExpected, err)
				}
				if err != nil {
					return 0, err
				}
				c.Successes.Add(1)
				return 1, nil
			}
		}
		generic, err := eventstore.New(env.Pool, &eventstore.Config{Schema: env.Schema, GroupSenders: env.GroupSenders, TypedReadsGeneric: true})
		if err != nil {
			return nil, err
		}
		p := &Plan{
			Op:        cycle(gs),
			Floor:     floorInsert1(env, nil),
			FloorName: "INSERT 1 row",
			Baselines: []Baseline{{Name: "grouping off", Op: cycle(env.Store)}, {Name: "TypedReadsGeneric", Op: cycle(generic)}},
			Check:     checkNoConflict,
		}
		withGroupStats(p, gs)
		return p, nil
	}
}

// runPerWriterOp is runstore AppendEvent on st, writer w on run g<base+w>:
// every append must persist with runSeq = the writer's call number + 1.
func runPerWriterOp(st *eventstore.Store, base int) OpFunc {
	rs, err := runstore.New(st, nil)
	if err != nil {
		return func(context.Context, int, int64, *Counters) (int, error) { return 0, err }
	}
	return func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
		run := "g" + strconv.Itoa(base+w)
		res, err := rs.AppendEvent(ctx, runEvent(run, "StepCompleted", seq))
		if errors.Is(err, pgdcb.ErrConditionFailed) {
			c.Conflicts.Add(1)
			return 0, fmt.Errorf("%w: %v", errNoConflictExpected, err)
		}
		if err != nil {
			return 0, err
		}
		if res.Idempotent || !res.Persisted || res.RunSeq != seq+1 {
			return 0, fmt.Errorf("SELF-CHECK FAILED: run %s: idempotent=%v persisted=%v runSeq %d, want a new event with runSeq %d",
				run, res.Idempotent, res.Persisted, res.RunSeq, seq+1)
		}
		c.Successes.Add(1)
		return 1, nil
	}
}
