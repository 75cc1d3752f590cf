package eventstore

import (
	"strconv"
	"strings"

	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// statements are the store's fixed SQL texts, rendered once for its schema.
type statements struct {
	appendEvents string
	head         [2]string // headSQL without and with the standby proof
	events       string    // "<schema>.events"
	eventCols    string

	// The three append statements with their prepared names and parameter
	// types, as the store sends them on its own connections (wire.go):
	// append_events' call (appendEvents), group commit with its keys tried
	// first (group.go) and a group of one, append_events with its keys tried
	// first (alone.go).
	appendEventsWire, appendGroupWire, appendAloneWire wireStmt
}

const eventColumns = "e.position, e.transaction_id, e.type, e.tags, e.data, e.metadata, e.event_id, e.occurred_at"

func newStatements(schema string) statements {
	// append_group with its keys tried first (docs/GROUPCOMMIT.md, "Busy
	// keys"): subquery t takes every key of the union without waiting
	// (pg_try_advisory_xact_lock*, any order: a try never waits, so no
	// deadlock) and lists those it could not have; append_group runs
	// after it (its arguments depend on t) and, when t found a key busy,
	// gets no keys and no members, and does nothing. Otherwise it takes
	// the keys again in its sorted pass (held by this transaction
	// already: no wait) and checks after them, as always. No table is
	// read outside append_group (no index involved).
	appendGroup := `SELECT t.busy, g.statuses, g.tx, g.positions, g.conflicts, g.occurred_at
		FROM ` + tryKeysSQL("$8", "$9") + ` t,
		LATERAL ` + schema + `.append_group(
		$1::text[], $2::integer[], $3::text[], $4::jsonb[], $5::jsonb[], $6::uuid[],
		CASE WHEN t.busy IS NULL THEN $7::integer[] END,
		CASE WHEN t.busy IS NULL THEN $8::bigint[] END, $9::boolean[],
		$10::boolean[], $11::integer[], $12::text[], $13::integer[], $14::text[], $15::integer[],
		$16::text[]::xid8[], $17::bigint[], $18::text[], $19::timestamptz[]) g`
	// A group of one (alone.go): append_events' call, its keys tried
	// first as appendGroup tries them (subquery t, same text). The call
	// sits in a LATERAL subquery whose only condition is t's: a
	// condition on nothing but an outer value is a one-time filter
	// evaluated before the function scan starts (OFFSET 0 keeps the
	// subquery whole, so the condition cannot move into a join), so
	// append_events runs only when every key was had, and the row then
	// carries its outputs; when a key was busy it never runs and they
	// are NULL (LEFT JOIN). TestAloneBusyKeyRunsNothing checks both.
	appendAlone := `SELECT t.busy, a.status, a.tx, a.positions, a.conflict_position, a.occurred_at
		FROM ` + tryKeysSQL("$7", "$8") + ` t
		LEFT JOIN LATERAL (SELECT * FROM ` + schema + `.append_events(
		$1::text[], $2::integer[], $3::text[], $4::jsonb[], $5::jsonb[], $6::uuid[],
		$7::bigint[], $8::boolean[],
		$9::boolean[], $10::integer[], $11::text[], $12::integer[], $13::text[],
		$14::xid8, $15::bigint, $16::text::pg_snapshot, $17::timestamptz)
		        WHERE t.busy IS NULL OFFSET 0) a ON true`
	st := statements{
		appendEvents: `SELECT status, tx, positions, conflict_position, occurred_at FROM ` + schema + `.append_events(
			$1::text[], $2::integer[], $3::text[], $4::jsonb[], $5::jsonb[], $6::uuid[],
			$7::bigint[], $8::boolean[],
			$9::boolean[], $10::integer[], $11::text[], $12::integer[], $13::text[],
			$14::xid8, $15::bigint, $16::text::pg_snapshot, $17::timestamptz)`,
		// head: Store.headSQL.
		events:    schema + ".events",
		eventCols: eventColumns,
	}
	st.appendEventsWire = newWireStmt(st.appendEvents, appendEventsOIDs...)
	st.appendGroupWire = newWireStmt(appendGroup, appendGroupOIDs...)
	st.appendAloneWire = newWireStmt(appendAlone, appendEventsOIDs...)
	return st
}

// headSQL is Head's statement: the last event in log order, a backward scan
// of events_log_order, one row, in the same statement (same snapshot) as
// pg_current_snapshot(); when proved, with what a standby can prove
// (proofSQL, parameter $1 Store.proofArg).
func (s *Store) headSQL(proved bool) string {
	proven, join := s.proofSQL(proved, "s.snap", "$1")
	return `SELECT s.snap::text, coalesce(h.transaction_id, '0'), coalesce(h.position, 0), h.occurred_at` + proven + `
			FROM (SELECT pg_current_snapshot() AS snap) s
			LEFT JOIN LATERAL (SELECT transaction_id, position, occurred_at FROM ` + s.sql.events + `
				ORDER BY transaction_id DESC, position DESC LIMIT 1) h ON true` + join
}

// tryKeysSQL is the subquery that tries the lock keys (parameter keys,
// bigint[]) each in its mode (parameter excl, boolean[]: exclusive or shared)
// without waiting, and returns the keys it did not get as busy (NULL when
// it got them all): the try of appendGroup and appendAlone.
func tryKeysSQL(keys, excl string) string {
	return `(SELECT array_agg(l.k) FILTER (WHERE NOT l.got) AS busy
			FROM (SELECT u.k, CASE WHEN u.x THEN pg_try_advisory_xact_lock(u.k)
			                       ELSE pg_try_advisory_xact_lock_shared(u.k) END AS got
			        FROM unnest(` + keys + `::bigint[], ` + excl + `::boolean[]) AS u(k, x)) l)`
}

// args accumulates positional parameters.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// whereQuery renders q as a predicate on alias e: items OR-ed, each item's types
// with = ANY and its tags with @> (events_tags GIN index; the types-only items
// use events_type_log_order). A match-all query renders as TRUE.
func whereQuery(q query.Query, a *args) string {
	return whereItems(q, a, false, false)
}

// whereItems is whereQuery; with fixedTags, the tags of an item without types
// are passed through a one-row subquery, `e.tags @> (SELECT $n::text[])`, so
// the planner estimates them without their value, in every call alike. A
// prepared statement's custom plans then cost what its generic plan costs,
// and PostgreSQL keeps the generic plan after five calls instead of planning
// again at every call: for the read of one entity the planning was three
// quarters of the statement's server CPU (bench/PROFILE.md, "The decision
// cycle"). The plan is the same either way (events_tags is the only index a
// tag can use; TestReadPlansAreGenericAndUseTheTagIndex). Items with types
// keep their values visible: the planner must weigh the type against the tag
// (a hot tag with a rare type belongs on events_type_log_order) — unless
// fixedTyped (Config.TypedReadsGeneric) hides them too: their types and tags
// then go through one-row subqueries alike, and the plan is the generic one,
// by the tag index, whatever the values.
func whereItems(q query.Query, a *args, fixedTags, fixedTyped bool) string {
	if q.MatchesAll() {
		return "TRUE"
	}
	items := q.Items()
	if len(items) == 0 {
		return "FALSE"
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		var conds []string
		hide := fixedTyped && len(it.Types) > 0 && it.Tags.Len() > 0
		switch {
		case hide:
			conds = append(conds, "e.type = ANY ((SELECT "+a.add(it.Types)+"::text[])::text[])")
		case len(it.Types) == 1:
			conds = append(conds, "e.type = "+a.add(it.Types[0]))
		case len(it.Types) > 1:
			conds = append(conds, "e.type = ANY ("+a.add(it.Types)+"::text[])")
		}
		if it.Tags.Len() > 0 && (hide || fixedTags && len(it.Types) == 0) {
			conds = append(conds, "e.tags @> (SELECT "+a.add(it.Tags.Strings())+"::text[])")
		} else if it.Tags.Len() > 0 {
			conds = append(conds, "e.tags @> "+a.add(it.Tags.Strings())+"::text[]")
		}
		parts = append(parts, "("+strings.Join(conds, " AND ")+")")
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// whereNotSeen renders "not seen by c" (see cursor.Cursor.Seen) on alias e:
// sorts after c, or — when c carries a snapshot — was written by a transaction
// in progress at the snapshot (its xip list). A committed transaction not
// visible in the snapshot is one of those two: one that started after the
// snapshot has an id >= xmax and sorts after c, which is at or before the last
// visible event. Both disjuncts are ranges of events_log_order, so the scan
// covers only rows written since the decision (same form as the append check).
func whereNotSeen(c cursor.Cursor, a *args) string {
	tx, pos := a.add(c.TransactionID), a.add(c.Position)
	after := "(e.transaction_id, e.position) > (" + tx + "::xid8, " + pos + "::bigint)"
	xip := inProgressNotAfter(c)
	if len(xip) == 0 {
		return after
	}
	return "(" + after + " OR e.transaction_id = ANY (" + a.add(xip) + "::xid8[]))"
}

// inProgressNotAfter returns the transactions in progress at c's snapshot
// that do not sort after c (id <= c.TransactionID). Only those need their own
// arm in "not seen by c": an event of a later one sorts after c and is in the
// range already. Usually none is left (the transactions still running at a
// read mostly started after the newest event it saw), and the check is then
// one range of events_log_order instead of a BitmapOr of one range per
// transaction.
func inProgressNotAfter(c cursor.Cursor) []uint64 {
	if c.Snapshot == nil {
		return nil
	}
	var xip []uint64
	for _, x := range c.Snapshot.Xip {
		if x <= c.TransactionID {
			xip = append(xip, x)
		}
	}
	return xip
}

// afterSnapshotArg is the snapshot argument of append_events for cursor c:
// c's snapshot with only the in-progress transactions that need their own arm
// (inProgressNotAfter), or NULL when none does (append_events then skips
// decoding it and checks one range).
func afterSnapshotArg(c *cursor.Cursor) *string {
	if c == nil || c.Snapshot == nil {
		return nil
	}
	xip := inProgressNotAfter(*c)
	if len(xip) == 0 {
		return nil
	}
	sn := (&cursor.Snapshot{Xmin: c.Snapshot.Xmin, Xmax: c.Snapshot.Xmax, Xip: xip}).String()
	return &sn
}

// checkItems are the items of an append's checks, flattened for append_events:
// one entry per item in idem, typeCounts and tagCounts, its types and tags
// appended to types and tags. Idempotency items come first. A count of 0 means
// "any".
type checkItems struct {
	idem       []bool
	typeCounts []int32
	types      []string
	tagCounts  []int32
	tags       []string
}

func (c *checkItems) add(q query.Query, idem bool) {
	for _, it := range q.Items() {
		c.idem = append(c.idem, idem)
		c.typeCounts = append(c.typeCounts, int32(len(it.Types)))
		c.types = append(c.types, it.Types...)
		c.tagCounts = append(c.tagCounts, int32(it.Tags.Len()))
		c.tags = append(c.tags, it.Tags.Strings()...)
	}
}

// checksFor flattens cond's idempotency query, then its condition.
func checksFor(cond *appendif.Condition) checkItems {
	c := checkItems{idem: []bool{}, typeCounts: []int32{}, types: []string{}, tagCounts: []int32{}, tags: []string{}}
	if cond != nil {
		c.add(cond.Idempotency, true)
		c.add(cond.FailIfEventsMatch, false)
	}
	return c
}
