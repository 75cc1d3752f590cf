package runstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// A run engine records a run; a retried StepCompleted is recognised as a
// duplicate; the snapshot projector materialises the run.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := fmt.Sprintf("runstore_example_%d", time.Now().UnixNano())
	defer pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	// The core schema, then runstore's tables and indexes.
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	if _, err := runstore.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	es, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	store, err := runstore.New(es, nil)
	if err != nil {
		panic(err)
	}

	emit := func(eventType, stepID string) runstore.AppendResult {
		res, err := store.AppendEvent(ctx, runstore.CanonicalEngineEvent{
			RunID:          "run-1",
			StepID:         stepID,
			EventType:      eventType,
			EventData:      []byte(`{"ok": true}`),
			IdempotencyKey: runstore.IdempotencyKey("run-1", stepID, "1", eventType, "plan-v1"),
			EmittedAt:      time.Now().UTC().Format(time.RFC3339Nano),
		})
		if err != nil {
			panic(err)
		}
		return res
	}
	fmt.Printf("%+v\n", emit("RunStarted", ""))
	fmt.Printf("%+v\n", emit("StepStarted", "charge"))
	fmt.Printf("%+v\n", emit("StepCompleted", "charge"))
	fmt.Printf("%+v\n", emit("StepCompleted", "charge")) // the activity retried

	if err := store.CatchUp(ctx); err != nil { // normally: go store.Projector().Run(ctx)
		panic(err)
	}
	snap, err := store.GetSnapshot(ctx, "run-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(snap.Status, snap.LastEventSeq, snap.Steps["charge"].Status)

	// Output:
	// {RunSeq:1 Idempotent:false Persisted:true}
	// {RunSeq:2 Idempotent:false Persisted:true}
	// {RunSeq:3 Idempotent:false Persisted:true}
	// {RunSeq:3 Idempotent:true Persisted:false}
	// RUNNING 3 COMPLETED
}
