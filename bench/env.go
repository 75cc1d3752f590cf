package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// SchemaPrefix starts the name of every schema the benchmark creates; only
// such schemas are ever dropped.
const SchemaPrefix = "pgdcb_bench_"

// Env is a workload's schema: a migrated event store and, next to it, the
// floor table.
type Env struct {
	Pool   *pgxpool.Pool
	Store  *eventstore.Store
	Schema string
	// Q is the quoted schema, for SQL.
	Q string
	// Floor is the qualified name of the floor table: the columns of events,
	// their defaults, and no index but the primary key.
	Floor string
	// Fixture is how many events the fixture put in the table.
	Fixture int
	// GroupSenders is --group-senders: Config.GroupSenders of the stores
	// with group commit that workloads build (0: the default).
	GroupSenders int
	// meter reads what a run costs (Result.Cost).
	meter *meter
}

// newEnv creates a fresh schema, migrates it, creates the floor table and,
// when fixture > 0, fills events with that many rows.
func newEnv(ctx context.Context, pool *pgxpool.Pool, fixture int) (*Env, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	schema := SchemaPrefix + hex.EncodeToString(b[:])
	// The core's migrations and runstore's, in every workload's schema (the
	// runstore workloads need its indexes; the others ran with them since
	// the first report, so their figures stay comparable).
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		return nil, fmt.Errorf("migrating %s: %w", schema, err)
	}
	if _, err := runstore.Migrate(ctx, pool, schema); err != nil {
		return nil, fmt.Errorf("migrating runstore in %s: %w", schema, err)
	}
	env := &Env{Pool: pool, Schema: schema, Q: pgx.Identifier{schema}.Sanitize(), Fixture: fixture}
	env.Floor = env.Q + ".floor_events"
	fail := func(err error) (*Env, error) {
		_ = env.drop(context.WithoutCancel(ctx))
		return nil, err
	}
	st, err := eventstore.New(pool, &eventstore.Config{Schema: schema, GroupCommitDisabled: true})
	if err != nil {
		return fail(err)
	}
	env.Store = st
	// The floor: same columns and defaults as events, no index but the
	// primary key, no trigger, no function, no lock.
	if _, err := pool.Exec(ctx, `CREATE TABLE `+env.Floor+` (
		position       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		transaction_id xid8        NOT NULL DEFAULT pg_current_xact_id(),
		type           text        NOT NULL,
		tags           text[]      NOT NULL,
		data           jsonb       NOT NULL,
		metadata       jsonb,
		event_id       uuid,
		occurred_at    timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fail(fmt.Errorf("creating the floor table: %w", err))
	}
	if fixture > 0 {
		if err := env.fill(ctx, fixture); err != nil {
			return fail(fmt.Errorf("filling %d events: %w", fixture, err))
		}
	}
	return env, nil
}

// Fixture layout (see docs/BENCHMARKS.md): event g (1-based) is tagged
// entity=<g mod entities> where entities = n/50, so every entity has exactly
// 50 events spread over the whole table; every (n/1000)-th event has type
// BenchMarker, so the type-only query returns 1000 events at every size.
const (
	entityEvents = 50
	markerEvents = 1000
	markerType   = "BenchMarker"
)

func entities(n int) int { return n / entityEvents }

// fill inserts n events directly (the append-only trigger refuses only
// UPDATE, DELETE and TRUNCATE), in chunks of 100k rows per transaction, then
// runs VACUUM ANALYZE so the planner and the visibility map see a table in
// steady state rather than one just loaded.
func (e *Env) fill(ctx context.Context, n int) error {
	if n%markerEvents != 0 || n < markerEvents {
		return fmt.Errorf("fixture size %d must be a multiple of %d", n, markerEvents)
	}
	const chunk = 100_000
	for lo := 1; lo <= n; lo += chunk {
		hi := min(lo+chunk-1, n)
		// Sequential scan of generate_series; every index of events is
		// maintained row by row (as it would be in production).
		if _, err := e.Pool.Exec(ctx, `INSERT INTO `+e.Q+`.events (type, tags, data)
			SELECT CASE WHEN g % $3 = 0 THEN '`+markerType+`' ELSE 'BenchEvent' || (g % 7) END,
			       ARRAY['entity=' || (g % $4), 'shard=' || (g % 16)],
			       jsonb_build_object('n', g, 'amount', g % 1000, 'note', 'benchmark fixture payload')
			  FROM generate_series($1::bigint, $2::bigint) AS g`,
			lo, hi, n/markerEvents, entities(n)); err != nil {
			return err
		}
	}
	_, err := e.Pool.Exec(ctx, `VACUUM ANALYZE `+e.Q+`.events`)
	return err
}

// drop removes the schema (only ever one this program created).
func (e *Env) drop(ctx context.Context) error {
	if !strings.HasPrefix(e.Schema, SchemaPrefix) {
		return fmt.Errorf("refusing to drop %q: not a benchmark schema", e.Schema)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := e.Pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+e.Q+` CASCADE`)
	return err
}
