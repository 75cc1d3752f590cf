package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// SchemaPrefix starts the name of every schema the program creates; only such
// schemas are ever dropped.
const SchemaPrefix = "tagidx_"

// Variant is one way of indexing tags.
type Variant int

const (
	// GIN is the store as it is: events with every index of
	// sql/migrations/001_events.sql, events_tags = GIN (tags).
	GIN Variant = iota
	// BTREE is the same events table without events_tags, plus a derived
	// table event_tags(tag, transaction_id, position) with a B-tree primary
	// key on all three columns.
	BTREE
)

func (v Variant) String() string {
	if v == GIN {
		return "GIN"
	}
	return "BTREE"
}

// entityEvents is the number of events per entity tag (loadEvents' shape).
const entityEvents = 50

// eventsTable is the events table of sql/migrations/001_events.sql, without the
// primary key (added after the bulk load, as events_pkey, the name the inline
// constraint gets) and without the append-only triggers.
const eventsTable = `CREATE TABLE %[1]s.events (
    position       bigint GENERATED ALWAYS AS IDENTITY,
    transaction_id xid8        NOT NULL DEFAULT pg_current_xact_id(),
    type           text        NOT NULL CONSTRAINT events_type_length CHECK (length(type) BETWEEN 1 AND 64),
    tags           text[]      NOT NULL,
    data           jsonb       NOT NULL,
    metadata       jsonb,
    event_id       uuid,
    occurred_at    timestamptz NOT NULL DEFAULT now()
)`

// index is one index build, timed on its own.
type index struct {
	name string
	ddl  string
}

// eventsIndexes are the events table's indexes of sql/migrations/001_events.sql
// (and the primary key), in the order they are built; events_tags only for
// GIN.
func eventsIndexes(q string, v Variant) []index {
	ix := []index{
		{"events_pkey", `ALTER TABLE %[1]s.events ADD CONSTRAINT events_pkey PRIMARY KEY (position)`},
		{"events_log_order", `CREATE INDEX events_log_order ON %[1]s.events (transaction_id, position)`},
		{"events_tags", `CREATE INDEX events_tags ON %[1]s.events USING gin (tags) WITH (fastupdate = off)`},
		{"events_type_log_order", `CREATE INDEX events_type_log_order ON %[1]s.events (type, transaction_id, position)`},
		{"events_event_id", `CREATE UNIQUE INDEX events_event_id ON %[1]s.events (event_id) WHERE event_id IS NOT NULL`},
	}
	if v == BTREE {
		ix = append(ix[:2], ix[3:]...)
		ix = append(ix, index{"event_tags_pkey", `ALTER TABLE %[1]s.event_tags ADD CONSTRAINT event_tags_pkey PRIMARY KEY (tag, transaction_id, position)`})
	}
	for i := range ix {
		ix[i].ddl = fmt.Sprintf(ix[i].ddl, q)
	}
	return ix
}

// Schema is one variant's schema.
type Schema struct {
	Variant Variant
	Name    string
	Q       string // quoted, for SQL
	// Tx is the transaction id of the bulk load (every loaded event has it).
	Tx uint64
	// Load are the load's steps with their durations.
	Load []step
	// Sizes are pg_relation_size of the relations after the load, by name.
	Sizes []relSize
}

type step struct {
	What string
	D    time.Duration
}

type relSize struct {
	Name  string
	Bytes int64
}

func newRunID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random schema name: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func schemaName(runID, suffix string) string { return SchemaPrefix + runID + "_" + suffix }

// dropSchemas drops schemas this program created (and refuses any other), on
// a connection of its own, even when ctx is cancelled.
func dropSchemas(ctx context.Context, dsn string, names []string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to drop %v: %w", names, err)
	}
	defer conn.Close(ctx)
	for _, name := range names {
		if !strings.HasPrefix(name, SchemaPrefix) {
			return fmt.Errorf("refusing to drop %q: not a %s* schema", name, SchemaPrefix)
		}
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			return fmt.Errorf("dropping %s: %w", name, err)
		}
	}
	return nil
}

// loadVariant creates the schema and fills it with n events in one INSERT …
// SELECT generate_series (one transaction, as loadEvents does), fills
// event_tags for BTREE, then builds the indexes and runs VACUUM ANALYZE, each
// step timed.
func loadVariant(ctx context.Context, conn *pgx.Conn, name string, v Variant, n int) (*Schema, error) {
	s := &Schema{Variant: v, Name: name, Q: pgx.Identifier{name}.Sanitize()}
	timed := func(what, sql string, args ...any) error {
		start := time.Now()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("%s (%s): %w", what, name, err)
		}
		s.Load = append(s.Load, step{what, time.Since(start)})
		return nil
	}
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+s.Q); err != nil {
		return nil, fmt.Errorf("creating schema %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(eventsTable, s.Q)); err != nil {
		return nil, fmt.Errorf("creating %s.events: %w", name, err)
	}
	if v == BTREE {
		if _, err := conn.Exec(ctx, `CREATE TABLE `+s.Q+`.event_tags (
			tag            text   NOT NULL,
			transaction_id xid8   NOT NULL,
			position       bigint NOT NULL)`); err != nil {
			return nil, fmt.Errorf("creating %s.event_tags: %w", name, err)
		}
	}
	// eventstore/bench_test.go loadEvents: event g (0-based) is position g+1
	// in a fresh table, entity account=g/50, shard=g%16, every 10th Opened.
	if err := timed("insert events", `INSERT INTO `+s.Q+`.events (type, tags, data)
		SELECT CASE WHEN g % 10 = 0 THEN 'Opened' ELSE 'Deposited' END,
		       ARRAY['account=' || (g / 50), 'shard=' || (g % 16)], jsonb_build_object('amount', g % 100)
		  FROM generate_series(0, $1 - 1) AS g`, n); err != nil {
		return nil, err
	}
	if v == BTREE {
		if err := timed("fill event_tags", `INSERT INTO `+s.Q+`.event_tags (tag, transaction_id, position)
			SELECT unnest(e.tags), e.transaction_id, e.position FROM `+s.Q+`.events e`); err != nil {
			return nil, err
		}
	}
	for _, ix := range eventsIndexes(s.Q, v) {
		if err := timed("index "+ix.name, ix.ddl); err != nil {
			return nil, err
		}
	}
	tables := []string{"events"}
	if v == BTREE {
		tables = append(tables, "event_tags")
	}
	for _, t := range tables {
		if err := timed("vacuum analyze "+t, `VACUUM ANALYZE `+s.Q+`.`+t); err != nil {
			return nil, err
		}
	}
	// Self-check: the positions are exactly 1..n, one transaction, and
	// event_tags has one row per (event, tag).
	var lo, hi, count, txs int64
	if err := conn.QueryRow(ctx, `SELECT min(position), max(position), count(*), count(DISTINCT transaction_id) FROM `+s.Q+`.events`).
		Scan(&lo, &hi, &count, &txs); err != nil {
		return nil, fmt.Errorf("checking %s.events: %w", name, err)
	}
	if lo != 1 || hi != int64(n) || count != int64(n) || txs != 1 {
		return nil, fmt.Errorf("%s.events: positions %d..%d, %d rows, %d transactions; want 1..%d, %d rows, 1 transaction", name, lo, hi, count, txs, n, n)
	}
	if err := conn.QueryRow(ctx, `SELECT transaction_id FROM `+s.Q+`.events WHERE position = 1`).Scan(&s.Tx); err != nil {
		return nil, fmt.Errorf("reading the load's transaction id: %w", err)
	}
	if v == BTREE {
		var tagRows int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+s.Q+`.event_tags`).Scan(&tagRows); err != nil {
			return nil, fmt.Errorf("counting %s.event_tags: %w", name, err)
		}
		if tagRows != 2*int64(n) {
			return nil, fmt.Errorf("%s.event_tags has %d rows, want %d", name, tagRows, 2*n)
		}
	}
	sizes, err := relationSizes(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	s.Sizes = sizes
	return s, nil
}

// relationSizes lists pg_relation_size of every table and index of the
// schema (main fork; the heap without TOAST, which this data does not use).
func relationSizes(ctx context.Context, conn *pgx.Conn, schema string) ([]relSize, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid)
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')
		 ORDER BY c.relkind DESC, c.relname`, schema)
	if err != nil {
		return nil, fmt.Errorf("relation sizes of %s: %w", schema, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (relSize, error) {
		var s relSize
		err := r.Scan(&s.Name, &s.Bytes)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("relation sizes of %s: %w", schema, err)
	}
	return out, nil
}

// floorTable is the unindexed floor: the columns and defaults of events, no
// index but the primary key, no trigger.
const floorTable = `CREATE TABLE %[1]s.floor_events (
    position       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transaction_id xid8        NOT NULL DEFAULT pg_current_xact_id(),
    type           text        NOT NULL,
    tags           text[]      NOT NULL,
    data           jsonb       NOT NULL,
    metadata       jsonb,
    event_id       uuid,
    occurred_at    timestamptz NOT NULL DEFAULT now()
)`
