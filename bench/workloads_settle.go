package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/pgdcb/pgdcb/eventstore"
)

// Settling workloads (issue #25; docs/FAULTS.md, "Settled outcomes"). Each
// runs its operation on a store with settling on (the default: every call
// carries an id on its first event, one more entry in the events_event_id
// index) against, as its baseline, the same operation on a store with
// Config.SettleDisabled (no id, a failed send answered "outcome unknown"),
// both with group commit on (the default, as the headline rows), measured in
// the same rounds (interleaved), other writers' boundaries for the baseline
// (offBase). The ratio to "settling off" is what settling costs when nothing
// fails (the target: at least 0.95×). Floor: INSERT 1 row. The notes give the
// settling store's GroupStats and SettleStats over the measured repetitions.
//
//   - settle/appendif/distinct/w{1,8,32}: AppendIf on a boundary of the
//     writer's own (the operation of appendif/distinct/*);
//   - settle/append/1ev/w{1,8,32}: Append of one event (append/1ev/*).
func init() {
	for _, n := range []int{1, 8, 32} {
		register(Workload{Name: "settle/appendif/distinct/w" + strconv.Itoa(n), Group: "settle-appendif", Writers: n, Quick: true,
			Prepare: prepareSettle(func(st *eventstore.Store, base int) OpFunc { return appendIfDistinctOp(st, n, base) })})
	}
	for _, n := range []int{1, 8, 32} {
		register(Workload{Name: "settle/append/1ev/w" + strconv.Itoa(n), Group: "settle-append", Writers: n, Quick: true,
			Prepare: prepareSettle(func(st *eventstore.Store, _ int) OpFunc { return appendOp(st, 1) })})
	}
}

// prepareSettle builds a settle workload from op(store, base): op on a
// grouped store with settling on (base 0) against the one-row INSERT floor,
// with op on a grouped store with settling off (base offBase) as the
// baseline.
func prepareSettle(op func(st *eventstore.Store, base int) OpFunc) func(context.Context, *Env) (*Plan, error) {
	return func(_ context.Context, env *Env) (*Plan, error) {
		on, err := groupedStore(env)
		if err != nil {
			return nil, err
		}
		if on.Config().SettleDisabled {
			return nil, fmt.Errorf("SELF-CHECK FAILED: the settling store has SettleDisabled")
		}
		off, err := eventstore.New(env.Pool, &eventstore.Config{Schema: env.Schema, GroupSenders: env.GroupSenders, SettleDisabled: true})
		if err != nil {
			return nil, err
		}
		p := &Plan{
			Op:        op(on, 0),
			Floor:     floorInsert1(env, nil),
			FloorName: "INSERT 1 row",
			Baselines: []Baseline{{Name: "settling off", Op: op(off, offBase)}},
			Check:     checkNoConflict,
		}
		withGroupStats(p, on)
		var before eventstore.SettleStats
		start, notes, extra := p.Start, p.Notes, p.Extra
		p.Start = func() { start(); before = on.SettleStats() }
		p.Notes = func(c *Counters, el float64) string {
			st := on.SettleStats()
			return fmt.Sprintf("%s; settled %d (present %d, absent %d, unknown %d)", notes(c, el),
				st.Settled-before.Settled, st.Present-before.Present, st.Absent-before.Absent, st.Unknown-before.Unknown)
		}
		p.Extra = func(c *Counters, el float64) map[string]any {
			m := extra(c, el)
			m["settled"] = on.SettleStats().Settled - before.Settled
			return m
		}
		return p, nil
	}
}
