package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// sizeResult is everything measured at one table size.
type sizeResult struct {
	N         int
	Schemas   []*Schema // GIN, BTREE
	Workloads []workloadResult
	// Inserted is how many events the write workloads added to GIN, to
	// BTREE (with their event_tags rows) and to BTREE's events alone
	// (warm-ups included).
	Inserted [3]int64
}

// cursorBack is how far behind the head the "near head" decision cursor is:
// within the 1000 events under which first_unseen_match takes its recent path.
const cursorBack = 100

func runSize(ctx context.Context, o *options, n int, logf func(string, ...any)) (*sizeResult, error) {
	mon, err := pgx.Connect(ctx, o.dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	defer mon.Close(context.WithoutCancel(ctx))
	runID, err := newRunID()
	if err != nil {
		return nil, err
	}
	names := []string{schemaName(runID, "gin"), schemaName(runID, "btree"), schemaName(runID, "floor")}
	defer func() {
		// A fresh connection: a cancelled context (Ctrl-C) closes mon.
		if err := dropSchemas(ctx, o.dsn, names); err != nil {
			logf("WARNING: %v", err)
		}
	}()

	// Bulk load and index builds get room; the measurement does not use
	// this connection's settings.
	if _, err := mon.Exec(ctx, `SET maintenance_work_mem = '1GB'`); err != nil {
		return nil, fmt.Errorf("setting maintenance_work_mem: %w", err)
	}
	res := &sizeResult{N: n}
	for i, v := range []Variant{GIN, BTREE} {
		logf("%d events: loading %s into %s", n, v, names[i])
		start := time.Now()
		s, err := loadVariant(ctx, mon, names[i], v, n)
		if err != nil {
			return nil, err
		}
		logf("%d events: %s loaded in %s", n, v, time.Since(start).Round(time.Millisecond))
		res.Schemas = append(res.Schemas, s)
	}
	if _, err := mon.Exec(ctx, `RESET maintenance_work_mem`); err != nil {
		return nil, fmt.Errorf("resetting maintenance_work_mem: %w", err)
	}
	floorQ := pgx.Identifier{names[2]}.Sanitize()
	if _, err := mon.Exec(ctx, `CREATE SCHEMA `+floorQ); err != nil {
		return nil, fmt.Errorf("creating %s: %w", names[2], err)
	}
	if _, err := mon.Exec(ctx, fmt.Sprintf(floorTable, floorQ)); err != nil {
		return nil, fmt.Errorf("creating the floor table: %w", err)
	}

	b := &bench{mon: mon, o: o, logf: logf}
	cfg, err := pgx.ParseConfig(o.dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing the DSN: %w", err)
	}
	cfg.OnNotice = b.onNotice
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	b.conn = conn
	b.enableExplain(ctx)
	if b.explainErr != nil {
		logf("WARNING: plans will not be captured: %v", b.explainErr)
	}

	f := &fixture{n: n, entities: n / entityEvents, rng: rand.New(rand.NewPCG(uint64(n), 42))}
	g, bt := res.Schemas[0], res.Schemas[1]
	for _, w := range readWorkloads(conn, f, g, bt) {
		r, err := b.run(ctx, w)
		if err != nil {
			return nil, err
		}
		res.Workloads = append(res.Workloads, r)
	}
	counters := &writeCounters{next: int64(f.entities)}
	for _, w := range writeWorkloads(conn, g, bt, floorQ, counters) {
		r, err := b.run(ctx, w)
		if err != nil {
			return nil, err
		}
		res.Workloads = append(res.Workloads, r)
	}
	res.Inserted = counters.inserted
	if err := checkAfterWrites(ctx, mon, res); err != nil {
		return nil, err
	}
	return res, nil
}

// fixture describes the loaded events: event g (0-based) is position g+1,
// tagged account=g/50 and shard=g%16, type Opened when g%10 = 0.
type fixture struct {
	n, entities int
	rng         *rand.Rand
}

func (f *fixture) entity() int { return f.rng.IntN(f.entities) }

func entityTag(e int) string { return "account=" + strconv.Itoa(e) }

// first position of entity e; its events are first .. first+49.
func firstPos(e int) int64 { return int64(e)*entityEvents + 1 }

// absentTag is a tag no event carries.
func (f *fixture) absentTag() string { return "account=absent-" + strconv.Itoa(f.rng.IntN(1<<30)) }

// eventCols are the store's read columns (eventstore/sqlgen.go eventColumns).
const eventCols = "e.position, e.transaction_id, e.type, e.tags, e.data, e.metadata, e.event_id, e.occurred_at"

// readWrap is the store's read statement (eventstore/read.go readSQL): the
// snapshot and the head of the log, one row, left-joined to the matching
// events, all in one statement.
func readWrap(q, inner string) string {
	return `SELECT s.snap::text, coalesce(h.transaction_id, '0'), coalesce(h.position, 0), r.*
		FROM (SELECT pg_current_snapshot() AS snap) s
		LEFT JOIN LATERAL (SELECT transaction_id, position FROM ` + q + `.events
			ORDER BY transaction_id DESC, position DESC LIMIT 1) h ON true
		LEFT JOIN LATERAL (` + inner + `) r ON true`
}

type readRow struct {
	pos  int64
	typ  string
	tags []string
}

// scanRead reads rows of readWrap as the store does (header columns from the
// first row only, the same Go types).
func scanRead(rows pgx.Rows) ([]readRow, error) {
	defer rows.Close()
	var (
		out      []readRow
		n        int
		snapText string
		headTx   uint64
		headPos  int64
	)
	for rows.Next() {
		var (
			pos  *int64
			txID *uint64
			typ  *string
			tgs  []string
			data []byte
			meta []byte
			id   pgtype.UUID
			at   pgtype.Timestamptz
		)
		var snapDest, hx, hp any
		if n == 0 {
			snapDest, hx, hp = &snapText, &headTx, &headPos
		}
		if err := rows.Scan(snapDest, hx, hp, &pos, &txID, &typ, &tgs, &data, &meta, &id, &at); err != nil {
			return nil, err
		}
		n++
		if pos == nil {
			break
		}
		out = append(out, readRow{pos: *pos, typ: *typ, tags: tgs})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if snapText == "" || headPos == 0 {
		return nil, errors.New("no snapshot/head header row")
	}
	return out, nil
}

// wantPositions checks that rows are exactly want, in that order.
func wantPositions(rows []readRow, want []int64) error {
	if len(rows) != len(want) {
		return fmt.Errorf("self-check: %d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		if r.pos != want[i] {
			return fmt.Errorf("self-check: row %d is position %d, want %d", i, r.pos, want[i])
		}
	}
	return nil
}

func span(first int64, count int, step int64) []int64 {
	out := make([]int64, count)
	for i := range out {
		out[i] = first + int64(i)*step
	}
	return out
}

// readOp runs a read statement and checks its rows.
func readOp(conn *pgx.Conn, sql string, mode pgx.QueryExecMode, args func() ([]any, []int64)) func(context.Context) error {
	return func(ctx context.Context) error {
		a, want := args()
		rows, err := conn.Query(ctx, sql, append([]any{mode}, a...)...)
		if err != nil {
			return err
		}
		got, err := scanRead(rows)
		if err != nil {
			return err
		}
		return wantPositions(got, want)
	}
}

// checkOp runs a conflict-check statement (one position or no row) and
// checks the answer: found within [lo, hi], or nothing when lo is 0.
func checkOp(conn *pgx.Conn, sql string, mode pgx.QueryExecMode, args func() ([]any, int64, int64)) func(context.Context) error {
	return func(ctx context.Context) error {
		a, lo, hi := args()
		var pos int64
		err := conn.QueryRow(ctx, sql, append([]any{mode}, a...)...).Scan(&pos)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if lo != 0 {
				return fmt.Errorf("self-check: no match, want a position in %d..%d", lo, hi)
			}
			return nil
		case err != nil:
			return err
		case lo == 0:
			return fmt.Errorf("self-check: found position %d, want none", pos)
		case pos < lo || pos > hi:
			return fmt.Errorf("self-check: found position %d, want one in %d..%d", pos, lo, hi)
		}
		return nil
	}
}

// Exec modes: pgx's default (a prepared statement, cached: PostgreSQL's plan
// cache may switch to a generic plan after five executions), and "planned per
// call" (the unnamed statement, parsed and planned with the real values at
// each call, as PL/pgSQL's EXECUTE in first_unseen_match does).
const (
	cached  = pgx.QueryExecModeCacheStatement
	perCall = pgx.QueryExecModeCacheDescribe
)

func readWorkloads(conn *pgx.Conn, f *fixture, g, bt *Schema) []workload {
	gq, bq := g.Q, bt.Q
	n := int64(f.n)
	entity := func() ([]any, []int64) {
		e := f.entity()
		return []any{[]string{entityTag(e)}}, span(firstPos(e), entityEvents, 1)
	}
	entityBT := func() ([]any, []int64) {
		e := f.entity()
		return []any{entityTag(e)}, span(firstPos(e), entityEvents, 1)
	}
	// The Opened events of an entity: g%10 = 0, 5 of its 50.
	opened := func(tagArg func(string) any) func() ([]any, []int64) {
		return func() ([]any, []int64) {
			e := f.entity()
			return []any{"Opened", tagArg(entityTag(e))}, span(firstPos(e), entityEvents/10, 10)
		}
	}
	last := func(tagArg func(string) any) func() ([]any, []int64) {
		return func() ([]any, []int64) {
			e := f.entity()
			return []any{tagArg(entityTag(e)), int64(1)}, []int64{firstPos(e) + entityEvents - 1}
		}
	}
	// Two tags: account=e AND shard=m, 3 or 4 events.
	twoTags := func(btree bool) func() ([]any, []int64) {
		return func() ([]any, []int64) {
			e, m := f.entity(), f.rng.IntN(16)
			var want []int64
			for p := firstPos(e); p < firstPos(e)+entityEvents; p++ {
				if (p-1)%16 == int64(m) {
					want = append(want, p)
				}
			}
			shard := "shard=" + strconv.Itoa(m)
			if btree {
				return []any{entityTag(e), shard}, want
			}
			return []any{[]string{entityTag(e), shard}}, want
		}
	}
	arr := func(t string) any { return []string{t} }
	str := func(t string) any { return t }

	ginEntity := readWrap(gq, `SELECT `+eventCols+` FROM `+gq+`.events e
			WHERE ((e.tags @> $1::text[]))
			ORDER BY e.transaction_id ASC, e.position ASC`)
	btEntity := readWrap(bq, `SELECT `+eventCols+` FROM `+bq+`.event_tags t JOIN `+bq+`.events e ON e.position = t.position
			WHERE t.tag = $1
			ORDER BY t.transaction_id ASC, t.position ASC`)
	ginType := readWrap(gq, `SELECT `+eventCols+` FROM `+gq+`.events e
			WHERE ((e.type = $1 AND e.tags @> $2::text[]))
			ORDER BY e.transaction_id ASC, e.position ASC`)
	btType := readWrap(bq, `SELECT `+eventCols+` FROM `+bq+`.event_tags t JOIN `+bq+`.events e ON e.position = t.position
			WHERE e.type = $1 AND t.tag = $2
			ORDER BY t.transaction_id ASC, t.position ASC`)
	// ReadLast: the fenced form of readSQL (Backwards, Limit, a tag item).
	ginLast := readWrap(gq, `SELECT `+eventCols+` FROM (SELECT * FROM `+gq+`.events e WHERE ((e.tags @> $1::text[])) OFFSET 0) e
			WHERE TRUE
			ORDER BY e.transaction_id DESC, e.position DESC LIMIT $2`)
	btLast := readWrap(bq, `SELECT `+eventCols+` FROM `+bq+`.event_tags t JOIN `+bq+`.events e ON e.position = t.position
			WHERE t.tag = $1
			ORDER BY t.transaction_id DESC, t.position DESC LIMIT $2`)
	ginTwo := ginEntity
	btTwo := readWrap(bq, `SELECT `+eventCols+` FROM `+bq+`.event_tags t
			JOIN `+bq+`.event_tags t2 ON t2.tag = $2 AND t2.transaction_id = t.transaction_id AND t2.position = t.position
			JOIN `+bq+`.events e ON e.position = t.position
			WHERE t.tag = $1
			ORDER BY t.transaction_id ASC, t.position ASC`)

	// Conflict checks (the condition check of append_events, in sql/). Recent
	// path: the cached statement over the events_log_order ranges since the
	// cursor, tag and type tests written IS TRUE (no index on them).
	ginRecent := `SELECT e.position FROM ` + gq + `.events e
             WHERE ((e.transaction_id, e.position) > ($1::xid8, $2::bigint) OR e.transaction_id = ANY ($3::xid8[]))
               AND ($4::text[] IS NULL OR (e.tags @> $4) IS TRUE)
               AND ($5::text[] IS NULL OR (e.type = ANY ($5)) IS TRUE)
             LIMIT 1`
	// The same question on event_tags: the range of the tag after the
	// cursor, plus the tag's rows of each in-progress transaction of the
	// decision's snapshot (a LATERAL probe per xip entry: as an OR, or as a
	// plain join, the generic plan filtered every row of the tag instead).
	btRecent := `SELECT x.position FROM (
		(SELECT t.position FROM ` + bq + `.event_tags t
		  WHERE t.tag = $1 AND (t.transaction_id, t.position) > ($2::xid8, $3::bigint) LIMIT 1)
		UNION ALL
		(SELECT l.position FROM unnest($4::xid8[]) AS p(tx)
		  CROSS JOIN LATERAL (SELECT t.position FROM ` + bq + `.event_tags t
		                       WHERE t.tag = $1 AND t.transaction_id = p.tx LIMIT 1) l LIMIT 1)) x
		LIMIT 1`
	// No cursor: the statement first_unseen_match builds and EXECUTEs.
	ginNone := `SELECT e.position FROM ` + gq + `.events e WHERE TRUE AND e.tags @> $1 LIMIT 1`
	btNone := `SELECT t.position FROM ` + bq + `.event_tags t WHERE t.tag = $1 LIMIT 1`

	noXip := []uint64{}
	recent := func(s *Schema, btree bool, pick func() (string, int64, int64)) func() ([]any, int64, int64) {
		return func() ([]any, int64, int64) {
			tag, lo, hi := pick()
			if btree {
				return []any{tag, s.Tx, n - cursorBack, noXip}, lo, hi
			}
			return []any{s.Tx, n - cursorBack, noXip, []string{tag}, nil}, lo, hi
		}
	}
	// A tag written after the cursor: one of the last two entities.
	hitRecent := func() (string, int64, int64) {
		e := f.entities - 1 - f.rng.IntN(2)
		return entityTag(e), max(firstPos(e), n-cursorBack+1), firstPos(e) + entityEvents - 1
	}
	// A tag whose events are all before the cursor (the usual passing check).
	oldRecent := func() (string, int64, int64) { return entityTag(f.rng.IntN(f.entities - 2)), 0, 0 }
	absent := func() (string, int64, int64) { return f.absentTag(), 0, 0 }
	none := func(btree bool, pick func() (string, int64, int64)) func() ([]any, int64, int64) {
		return func() ([]any, int64, int64) {
			tag, lo, hi := pick()
			if btree {
				return []any{tag}, lo, hi
			}
			return []any{[]string{tag}}, lo, hi
		}
	}
	hitAny := func() (string, int64, int64) {
		e := f.entity()
		return entityTag(e), firstPos(e), firstPos(e) + entityEvents - 1
	}
	// first_unseen_match runs with SET enable_seqscan = off.
	noSeq, seqReset := []string{`SET enable_seqscan = off`}, []string{`RESET enable_seqscan`}
	// The recent check's statement as a generic plan: what it costs when it
	// is not re-planned at every call.
	generic, genericReset := []string{`SET plan_cache_mode = force_generic_plan`}, []string{`RESET plan_cache_mode`}

	return []workload{
		{name: "read/entity", explain: true,
			what: "one entity's 50 events in (transaction_id, position) order, by tag account=N (random N)",
			targets: []target{
				{label: "GIN", events: entityEvents, op: readOp(conn, ginEntity, cached, entity)},
				{label: "BTREE", events: entityEvents, op: readOp(conn, btEntity, cached, entityBT)},
			}},
		{name: "read/entity+type", explain: true,
			what: "one entity's Opened events (5 of 50): type = 'Opened' and tag account=N",
			targets: []target{
				{label: "GIN", events: 5, op: readOp(conn, ginType, cached, opened(arr))},
				{label: "BTREE", events: 5, op: readOp(conn, btType, cached, opened(str))},
			}},
		{name: "check/recent/hit", explain: true, setup: noSeq, reset: seqReset,
			what: fmt.Sprintf("conflict check, cursor %d events before the head, a tag written after it (found)", cursorBack),
			targets: []target{
				{label: "GIN", events: 1, op: checkOp(conn, ginRecent, cached, recent(g, false, hitRecent))},
				{label: "BTREE", events: 1, op: checkOp(conn, btRecent, cached, recent(bt, true, hitRecent))},
				{label: "GIN generic plan", events: 1, op: checkOp(conn, ginRecent, cached, recent(g, false, hitRecent)),
					setup: generic, reset: genericReset},
			}},
		{name: "check/recent/old-tag", explain: true, setup: noSeq, reset: seqReset,
			what: "conflict check, same cursor, a tag whose 50 events are all before it (not found: the usual passing check)",
			targets: []target{
				{label: "GIN", events: 1, op: checkOp(conn, ginRecent, cached, recent(g, false, oldRecent))},
				{label: "BTREE", events: 1, op: checkOp(conn, btRecent, cached, recent(bt, true, oldRecent))},
				{label: "GIN generic plan", events: 1, op: checkOp(conn, ginRecent, cached, recent(g, false, oldRecent)),
					setup: generic, reset: genericReset},
			}},
		{name: "check/recent/absent", explain: true, setup: noSeq, reset: seqReset,
			what: "conflict check, same cursor, a tag no event carries (not found)",
			targets: []target{
				{label: "GIN", events: 1, op: checkOp(conn, ginRecent, cached, recent(g, false, absent))},
				{label: "BTREE", events: 1, op: checkOp(conn, btRecent, cached, recent(bt, true, absent))},
				{label: "GIN generic plan", events: 1, op: checkOp(conn, ginRecent, cached, recent(g, false, absent)),
					setup: generic, reset: genericReset},
			}},
		{name: "check/none/hit", explain: true, setup: noSeq, reset: seqReset,
			what: "check without a cursor (any event with the tag, LIMIT 1), an existing tag (found)",
			targets: []target{
				{label: "GIN", events: 1, op: checkOp(conn, ginNone, perCall, none(false, hitAny))},
				{label: "BTREE", events: 1, op: checkOp(conn, btNone, cached, none(true, hitAny))},
				{label: "BTREE planned per call", events: 1, op: checkOp(conn, btNone, perCall, none(true, hitAny))},
			}},
		{name: "check/none/absent", explain: true, setup: noSeq, reset: seqReset,
			what: "check without a cursor, a tag no event carries (not found: every idempotency check of a new key)",
			targets: []target{
				{label: "GIN", events: 1, op: checkOp(conn, ginNone, perCall, none(false, absent))},
				{label: "BTREE", events: 1, op: checkOp(conn, btNone, cached, none(true, absent))},
				{label: "BTREE planned per call", events: 1, op: checkOp(conn, btNone, perCall, none(true, absent))},
			}},
		{name: "read/last", explain: true,
			what: "the last event of an entity (ReadLast: ORDER BY transaction_id DESC, position DESC LIMIT 1)",
			targets: []target{
				{label: "GIN", events: 1, op: readOp(conn, ginLast, cached, last(arr))},
				{label: "BTREE", events: 1, op: readOp(conn, btLast, cached, last(str))},
			}},
		{name: "read/two-tags", explain: true,
			what: "account=N AND shard=M (3 or 4 events), in log order",
			targets: []target{
				{label: "GIN", events: 4, op: readOp(conn, ginTwo, cached, twoTags(false))},
				{label: "BTREE", events: 4, op: readOp(conn, btTwo, cached, twoTags(true))},
				{label: "BTREE planned per call", events: 4, op: readOp(conn, btTwo, perCall, twoTags(true))},
			}},
	}
}

// noTagIndex is the counter index of writes to BTREE's events table without
// event_tags rows.
const noTagIndex = 2

// writeCounters hands out fresh entity numbers (so every written event has a
// new entity tag) and counts inserted events per variant.
type writeCounters struct {
	next     int64
	inserted [3]int64 // GIN, BTREE (with event_tags), BTREE's events alone
}

func writeWorkloads(conn *pgx.Conn, g, bt *Schema, floorQ string, c *writeCounters) []workload {
	single := func(table string) string {
		return `INSERT INTO ` + table + ` (type, tags, data) VALUES ($1, $2, $3)`
	}
	// Rows, in batch order (positions ascend with the batch index).
	batch := func(table string) string {
		return `INSERT INTO ` + table + ` (type, tags, data)
		SELECT u.type, ARRAY[u.account, u.shard], u.data
		  FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[]) WITH ORDINALITY AS u(type, account, shard, data, n)
		 ORDER BY u.n`
	}
	// BTREE: the event and its event_tags rows in one statement.
	withTags := func(insert string) string {
		return `WITH e AS (` + insert + ` RETURNING transaction_id, position, tags)
		INSERT INTO ` + bt.Q + `.event_tags (tag, transaction_id, position)
		SELECT unnest(e.tags), e.transaction_id, e.position FROM e`
	}
	event := func(k int64) (typ string, account string, shard string, data string) {
		typ = "Deposited"
		if k%10 == 0 {
			typ = "Opened"
		}
		return typ, "account=" + strconv.FormatInt(k, 10), "shard=" + strconv.FormatInt(k%16, 10),
			`{"amount": ` + strconv.FormatInt(k%100, 10) + `}`
	}
	// variant: 0 GIN, 1 BTREE, -1 floor, 2 BTREE's events without event_tags.
	op := func(sql string, events, variant int) func(context.Context) error {
		wantRows := int64(events)
		if variant == int(BTREE) {
			wantRows *= 2 // the outer INSERT counts event_tags rows
		}
		return func(ctx context.Context) error {
			var args []any
			if events == 1 {
				typ, account, shard, data := event(c.next)
				c.next++
				args = []any{typ, []string{account, shard}, data}
			} else {
				types, accounts, shards, datas := make([]string, events), make([]string, events), make([]string, events), make([]string, events)
				for i := range events {
					types[i], accounts[i], shards[i], datas[i] = event(c.next)
					c.next++
				}
				args = []any{types, accounts, shards, datas}
			}
			tag, err := conn.Exec(ctx, sql, args...)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != wantRows {
				return fmt.Errorf("self-check: %d rows inserted, want %d", tag.RowsAffected(), wantRows)
			}
			if variant >= 0 {
				c.inserted[variant] += int64(events)
			}
			return nil
		}
	}
	floor := floorQ + ".floor_events"
	mk := func(name, what string, events int, setup, reset []string) workload {
		ins := single
		if events > 1 {
			ins = batch
		}
		return workload{name: name, what: what, write: true, setup: setup, reset: reset,
			targets: []target{
				{label: "floor", events: events, op: op(ins(floor), events, -1)},
				{label: "GIN", events: events, op: op(ins(g.Q+".events"), events, int(GIN))},
				{label: "BTREE", events: events, op: op(withTags(ins(bt.Q+".events")), events, int(BTREE))},
				// The BTREE variant's events table alone: every index of the
				// store but the tag index. Its rows get no event_tags rows
				// (the after-write check counts them apart).
				{label: "no tag index", events: events, op: op(ins(bt.Q+".events"), events, noTagIndex)},
			}}
	}
	syncOff, syncReset := []string{`SET synchronous_commit = off`}, []string{`RESET synchronous_commit`}
	return []workload{
		mk("write/1ev", "autocommit INSERT of one event (a new entity tag + a shard tag)", 1, nil, nil),
		mk("write/batch100", "autocommit INSERT … SELECT FROM unnest of 100 events (100 new entity tags)", 100, nil, nil),
		mk("write/1ev/sync-off", "the same one-event INSERT, synchronous_commit = off in the session (CPU cost without the WAL flush wait)", 1, syncOff, syncReset),
		mk("write/batch100/sync-off", "the same 100-event INSERT, synchronous_commit = off", 100, syncOff, syncReset),
	}
}

// checkAfterWrites: every event written to BTREE has its event_tags rows,
// and each variant holds exactly the loaded events plus those written.
func checkAfterWrites(ctx context.Context, conn *pgx.Conn, res *sizeResult) error {
	for i, s := range res.Schemas {
		var events int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+s.Q+`.events`).Scan(&events); err != nil {
			return fmt.Errorf("counting %s.events: %w", s.Name, err)
		}
		want := int64(res.N) + res.Inserted[i]
		if s.Variant == BTREE {
			want += res.Inserted[noTagIndex]
		}
		if events != want {
			return fmt.Errorf("self-check: %s.events has %d rows after the writes, want %d", s.Name, events, want)
		}
		if s.Variant == BTREE {
			var tags int64
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+s.Q+`.event_tags`).Scan(&tags); err != nil {
				return fmt.Errorf("counting %s.event_tags: %w", s.Name, err)
			}
			if tagged := events - res.Inserted[noTagIndex]; tags != 2*tagged {
				return fmt.Errorf("self-check: %s.event_tags has %d rows for %d tagged events, want %d", s.Name, tags, tagged, 2*tagged)
			}
		}
	}
	return nil
}
