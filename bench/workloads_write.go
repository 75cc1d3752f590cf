package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// writeWorkloads are the built-in write workloads, in run order.
func writeWorkloads() []Workload {
	var ws []Workload
	register := func(w ...Workload) { ws = append(ws, w...) }
	// The headline rows measure the default configuration (group commit
	// on, prepareGrouped); the same operations on the per-call path
	// (Config.GroupCommitDisabled) carry the suffix /no-group.
	for _, n := range []int{1, 8, 32, 128} {
		register(Workload{Name: "append/1ev/w" + strconv.Itoa(n), Group: "append", Writers: n, Quick: n <= 32,
			Prepare: prepareGrouped(n, func(st *eventstore.Store, _ int) OpFunc { return appendOp(st, 1) }, true)})
	}
	for _, n := range []int{1, 8, 32} {
		register(Workload{Name: "append/1ev/w" + strconv.Itoa(n) + "/no-group", Group: "append-nogroup", Writers: n, Quick: true, Prepare: prepareAppend(1)})
	}
	// The per-call path with Config.NotifyDisabled: what the NOTIFY costs.
	for _, n := range []int{1, 8, 32} {
		register(Workload{Name: "append/1ev/w" + strconv.Itoa(n) + "/no-group/no-notify", Group: "append-nonotify", Writers: n, Quick: true, Prepare: prepareAppendNoNotify})
	}
	register(
		Workload{Name: "append/batch10", Group: "append-batch", Writers: 1, Quick: true, Prepare: prepareAppend(10)},
		Workload{Name: "append/batch100", Group: "append-batch", Writers: 1, Quick: true, Prepare: prepareAppend(100)},
	)
	// The same INSERTs as the floors into a copy of events with its indexes:
	// the part of each ratio that the indexes cost.
	register(
		Workload{Name: "insert-indexed/1ev/w1", Group: "indexed", Writers: 1, Quick: true, Prepare: prepareIndexedInsert(1)},
		Workload{Name: "insert-indexed/1ev/w8", Group: "indexed", Writers: 8, Quick: true, Prepare: prepareIndexedInsert(1)},
		Workload{Name: "insert-indexed/batch100", Group: "indexed", Writers: 1, Quick: true, Prepare: prepareIndexedInsert(100)},
	)
	for _, n := range []int{1, 8, 32, 128} {
		register(Workload{Name: "appendif/distinct/w" + strconv.Itoa(n), Group: "appendif", Writers: n, Quick: n <= 32,
			Prepare: prepareGrouped(n, func(st *eventstore.Store, base int) OpFunc { return appendIfDistinctOp(st, n, base) }, true)})
	}
	for _, n := range []int{1, 8, 32} {
		register(Workload{Name: "appendif/distinct/w" + strconv.Itoa(n) + "/no-group", Group: "appendif-nogroup", Writers: n, Quick: true, Prepare: prepareAppendIfDistinct(n)})
	}
	for _, n := range []int{1, 8, 32} {
		register(Workload{Name: "cycle/entity10/w" + strconv.Itoa(n), Group: "cycle", Writers: n, Quick: true, Prepare: prepareCycle(n)})
	}
	register(
		Workload{Name: "appendif/contended/w8", Group: "contended", Writers: 8, Quick: true, Prepare: prepareContended},
		Workload{Name: "idempotent/new-key", Group: "idempotent", Writers: 1, Quick: true, Prepare: prepareIdempotentNew},
		Workload{Name: "idempotent/duplicate", Group: "idempotent", Writers: 1, Quick: true, Prepare: prepareIdempotentDup},
	)
	return ws
}

const appendedType = "BenchAppended"

// benchEvent is the event every write workload appends (and every floor
// inserts): two tags, a small JSON payload of about 60 bytes.
func benchEvent(w int, seq int64, extraTags ...string) pgdcb.Event {
	ts := append([]string{"account=" + strconv.Itoa(w) + "-" + strconv.FormatInt(seq%100, 10), "writer=" + strconv.Itoa(w)}, extraTags...)
	data := `{"n":` + strconv.FormatInt(seq, 10) + `,"amount":42,"note":"benchmark payload"}`
	return pgdcb.Event{Type: appendedType, Tags: tags.MustParseSet(ts...), Data: json.RawMessage(data)}
}

// floorInsert1 is the floor of one-event writes: an autocommit single-row
// INSERT of the same row into the unindexed floor table.
func floorInsert1(env *Env, extraTags func(w int, seq int64) []string) OpFunc {
	return insert1(env, env.Floor, extraTags)
}

// insert1 is an autocommit single-row INSERT of the bench event into table.
func insert1(env *Env, table string, extraTags func(w int, seq int64) []string) OpFunc {
	sql := `INSERT INTO ` + table + ` (type, tags, data) VALUES ($1, $2::text[], $3::jsonb)`
	return func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
		var extra []string
		if extraTags != nil {
			extra = extraTags(w, seq)
		}
		e := benchEvent(w, seq, extra...)
		if _, err := env.Pool.Exec(ctx, sql, e.Type, e.Tags.Strings(), string(e.Data)); err != nil {
			return 0, err
		}
		return 1, nil
	}
}

// floorInsertBatch is the floor of a batch append: one autocommit
// INSERT … SELECT FROM unnest(…) of the same rows.
func floorInsertBatch(env *Env, size int) OpFunc {
	return insertBatch(env, env.Floor, size)
}

// insertBatch is one autocommit INSERT … SELECT FROM unnest(…) of size bench
// events into table.
func insertBatch(env *Env, table string, size int) OpFunc {
	sql := `INSERT INTO ` + table + ` (type, tags, data)
		SELECT t, ARRAY[a, b], d::jsonb FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(t, a, b, d)`
	return func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
		ty, a, b, d := make([]string, size), make([]string, size), make([]string, size), make([]string, size)
		for i := range size {
			e := benchEvent(w, seq*int64(size)+int64(i))
			ts := e.Tags.Strings()
			ty[i], a[i], b[i], d[i] = e.Type, ts[0], ts[1], string(e.Data)
		}
		if _, err := env.Pool.Exec(ctx, sql, ty, a, b, d); err != nil {
			return 0, err
		}
		return size, nil
	}
}

// appendOp is Append of size bench events on st.
func appendOp(st *eventstore.Store, size int) OpFunc {
	return func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
		evs := make([]pgdcb.Event, size)
		for i := range evs {
			evs[i] = benchEvent(w, seq*int64(size)+int64(i))
		}
		res, err := st.Append(ctx, evs)
		if err != nil {
			return 0, err
		}
		if len(res.Positions) != size {
			return 0, fmt.Errorf("append returned %d positions for %d events", len(res.Positions), size)
		}
		c.Successes.Add(1)
		return size, nil
	}
}

func prepareAppend(size int) func(context.Context, *Env) (*Plan, error) {
	return func(_ context.Context, env *Env) (*Plan, error) {
		p := &Plan{Op: appendOp(env.Store, size)}
		if size == 1 {
			p.Floor, p.FloorName = floorInsert1(env, nil), "INSERT 1 row"
		} else {
			p.Floor, p.FloorName = floorInsertBatch(env, size), fmt.Sprintf("INSERT unnest %d rows", size)
		}
		return p, nil
	}
}

// prepareIndexedInsert is not pgdcb at all: the floor's INSERT into a copy of
// the events table with all its indexes (no trigger, no function, no lock, no
// check). Its ratio to the floor is what the indexes alone cost, a bound on
// what any append into this table can reach.
func prepareIndexedInsert(size int) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		table := env.Q + ".indexed_events"
		if _, err := env.Pool.Exec(ctx, `CREATE TABLE `+table+` (LIKE `+env.Q+`.events INCLUDING ALL)`); err != nil {
			return nil, fmt.Errorf("creating the indexed copy: %w", err)
		}
		if size == 1 {
			return &Plan{Op: insert1(env, table, nil), Floor: floorInsert1(env, nil), FloorName: "INSERT 1 row"}, nil
		}
		return &Plan{Op: insertBatch(env, table, size), Floor: floorInsertBatch(env, size), FloorName: fmt.Sprintf("INSERT unnest %d rows", size)}, nil
	}
}

// prepareAppendNoNotify is prepareAppend(1) on a store with NotifyDisabled.
func prepareAppendNoNotify(ctx context.Context, env *Env) (*Plan, error) {
	st, err := eventstore.New(env.Pool, &eventstore.Config{Schema: env.Schema, NotifyDisabled: true, GroupCommitDisabled: true})
	if err != nil {
		return nil, err
	}
	e := *env
	e.Store = st
	return prepareAppend(1)(ctx, &e)
}

// errNoConflictExpected is returned when a workload that cannot conflict saw
// a conflict: the benchmark is wrong, or the store is.
var errNoConflictExpected = errors.New("SELF-CHECK FAILED: unexpected condition failure in a workload without conflicts")

// prepareAppendIfDistinct: every writer decides on its own boundary (tag
// writer=<w>), with the cursor of its previous append as the decision: the
// check runs (exclusive key lock, index probe) but can never fail.
func prepareAppendIfDistinct(writers int) func(context.Context, *Env) (*Plan, error) {
	return func(_ context.Context, env *Env) (*Plan, error) {
		return &Plan{
			Op:        appendIfDistinctOp(env.Store, writers, 0),
			Floor:     floorInsert1(env, nil),
			FloorName: "INSERT 1 row",
			Check:     checkNoConflict,
		}, nil
	}
}

// appendIfDistinctOp is the operation of prepareAppendIfDistinct on st for
// up to writers writers: writer w decides on boundary writer=<base+w> (ops
// on one schema with distinct bases never meet).
func appendIfDistinctOp(st *eventstore.Store, writers, base int) OpFunc {
	type state struct {
		q   query.Query
		cur *cursor.Cursor
	}
	states := make([]state, writers) // one per writer; each touched by its writer only
	return func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
		s := &states[w]
		if seq == 0 {
			s.q = query.Tagged([]string{appendedType}, "writer="+strconv.Itoa(base+w))
		}
		res, err := st.AppendIf(ctx, []pgdcb.Event{benchEvent(base+w, seq)}, appendif.FailIf(s.q, s.cur))
		if errors.Is(err, pgdcb.ErrConditionFailed) {
			c.Conflicts.Add(1)
			return 0, fmt.Errorf("%w: %v", errNoConflictExpected, err)
		}
		if err != nil {
			return 0, err
		}
		c.Successes.Add(1)
		s.cur = &cursor.Cursor{TransactionID: res.TransactionID, Position: res.Positions[0]}
		return 1, nil
	}
}

// checkNoConflict is the Check of workloads that cannot conflict.
func checkNoConflict(_ context.Context, c *Counters) error {
	if n := c.Conflicts.Load(); n != 0 {
		return fmt.Errorf("%w: %d conflicts", errNoConflictExpected, n)
	}
	return nil
}

const countedType = "BenchCounted"

// prepareContended: all writers decide on one boundary (counter=1): read the
// last number with ReadLast, append the next one with AppendIf, and on a
// conflict decide again. It measures committed decisions per second; the
// check verifies that the numbers are gapless and unique (no lost decision)
// and that conflicts did happen.
func prepareContended(_ context.Context, env *Env) (*Plan, error) {
	q := query.Tagged([]string{countedType}, "counter=1")
	op := func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
		for {
			last, cur, err := env.Store.ReadLast(ctx, q)
			if err != nil {
				return 0, err
			}
			next := int64(1)
			if last != nil {
				var d struct{ N int64 }
				if err := json.Unmarshal(last.Data, &d); err != nil {
					return 0, err
				}
				next = d.N + 1
			}
			ev := pgdcb.Event{Type: countedType, Tags: tags.MustParseSet("counter=1", "writer="+strconv.Itoa(w)),
				Data: json.RawMessage(`{"n":` + strconv.FormatInt(next, 10) + `}`)}
			_, err = env.Store.AppendIf(ctx, []pgdcb.Event{ev}, appendif.FailIf(q, &cur))
			if errors.Is(err, pgdcb.ErrConditionFailed) {
				c.Conflicts.Add(1)
				c.Retries.Add(1)
				continue
			}
			if err != nil {
				return 0, err
			}
			c.Successes.Add(1)
			return 1, nil
		}
	}
	rates := func(c *Counters, secs float64) (succ, confl, retry, committed float64) {
		s, f := float64(c.Successes.Load()), float64(c.Conflicts.Load())
		if s+f > 0 {
			succ, confl = s/(s+f), f/(s+f)
		}
		if s > 0 {
			retry = float64(c.Retries.Load()) / s
		}
		if secs > 0 {
			committed = s / secs
		}
		return
	}
	return &Plan{
		Op:        op,
		Floor:     floorInsert1(env, nil),
		FloorName: "INSERT 1 row",
		Check: func(ctx context.Context, c *Counters) error {
			if c.Conflicts.Load() == 0 {
				return errors.New("SELF-CHECK FAILED: the contended workload saw no conflict (the boundary was not contended, or conflicts are not detected)")
			}
			evs, _, err := env.Store.ReadAll(ctx, q, nil)
			if err != nil {
				return err
			}
			for i, e := range evs {
				var d struct{ N int64 }
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return err
				}
				if d.N != int64(i+1) {
					return fmt.Errorf("SELF-CHECK FAILED: lost decision: event %d of the counter carries n=%d, want %d", i, d.N, i+1)
				}
			}
			return nil
		},
		Notes: func(c *Counters, secs float64) string {
			succ, confl, retry, committed := rates(c, secs)
			return fmt.Sprintf("attempts: %.0f%% committed, %.0f%% conflicts; %.2f retries per commit; %.0f committed appends/s", succ*100, confl*100, retry, committed)
		},
		Extra: func(c *Counters, secs float64) map[string]any {
			succ, confl, retry, committed := rates(c, secs)
			return map[string]any{
				"success_rate": succ, "conflict_rate": confl, "retries_per_commit": retry,
				"committed_appends_per_s": committed,
				"attempts":                c.Successes.Load() + c.Conflicts.Load(), "conflicts": c.Conflicts.Load(),
			}
		},
	}, nil
}

func idemKey(w int, seq int64) string {
	return "idempotency_key=" + strconv.Itoa(w) + "-" + strconv.FormatInt(seq, 10)
}

// prepareIdempotentNew: every append carries a fresh idempotency key (a tag
// and the idempotency query on it); none may be refused.
func prepareIdempotentNew(_ context.Context, env *Env) (*Plan, error) {
	return &Plan{
		Op: func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
			key := idemKey(w, seq)
			_, err := env.Store.AppendIf(ctx, []pgdcb.Event{benchEvent(w, seq, key)},
				appendif.Condition{Idempotency: query.Tagged(nil, key)})
			if errors.Is(err, pgdcb.ErrIdempotent) {
				c.Idempotent.Add(1)
				return 0, fmt.Errorf("SELF-CHECK FAILED: a new idempotency key was refused as a duplicate: %w", err)
			}
			if err != nil {
				return 0, err
			}
			c.Successes.Add(1)
			return 1, nil
		},
		Floor:     floorInsert1(env, func(w int, seq int64) []string { return []string{idemKey(w, seq)} }),
		FloorName: "INSERT 1 row",
	}, nil
}

// dupKeys is how many keys the duplicate workload appends first and then
// re-sends in turn.
const dupKeys = 1000

// prepareIdempotentDup: every append re-sends a key already in the log; every
// one must be refused with ErrIdempotent. Its rate counts refused appends.
func prepareIdempotentDup(ctx context.Context, env *Env) (*Plan, error) {
	evs := make([]pgdcb.Event, 0, dupKeys)
	for i := range dupKeys {
		evs = append(evs, benchEvent(0, int64(i), idemKey(0, int64(i))))
	}
	if _, err := env.Store.Append(ctx, evs); err != nil {
		return nil, err
	}
	return &Plan{
		Op: func(ctx context.Context, w int, seq int64, c *Counters) (int, error) {
			key := idemKey(0, seq%dupKeys)
			_, err := env.Store.AppendIf(ctx, []pgdcb.Event{benchEvent(w, seq, key)},
				appendif.Condition{Idempotency: query.Tagged(nil, key)})
			if err == nil {
				return 0, errors.New("SELF-CHECK FAILED: a duplicate idempotency key was appended")
			}
			if !errors.Is(err, pgdcb.ErrIdempotent) {
				return 0, err
			}
			c.Idempotent.Add(1)
			return 1, nil
		},
		Floor:     floorInsert1(env, func(w int, seq int64) []string { return []string{idemKey(w, seq)} }),
		FloorName: "INSERT 1 row",
	}, nil
}
