package eventstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Following the events that carry a metadata marker (no query of types and
// tags names them) with the tail's horizon and cursor rules.
func ExampleStore_ReadTailWith() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := fmt.Sprintf("pgdcb_example_%d", time.Now().UnixNano())
	defer pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	var last pgdcb.AppendResult
	for i, meta := range []string{`{"importer": "v1"}`, `{}`, `{"importer": "v1", "file": "b.csv"}`} {
		ev := pgdcb.MustEvent("Row", map[string]int{"n": i})
		ev.Metadata = json.RawMessage(meta)
		if last, err = store.Append(ctx, []pgdcb.Event{ev}); err != nil {
			panic(err)
		}
	}
	after := cursor.Start
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.After(time.Minute); ; {
		b, err := store.ReadTailWith(ctx, query.All(), eventstore.TailOptions{
			After: after, Limit: 100, MetadataContains: json.RawMessage(`{"importer": "v1"}`)})
		if err != nil {
			panic(err)
		}
		for _, ev := range b.Events {
			fmt.Println(ev.Type, string(ev.Data))
		}
		after = b.Cursor
		if cursor.Compare(after.TransactionID, after.Position, last.Cursor().TransactionID, last.Cursor().Position) >= 0 {
			break // an open transaction of the database may hold the tail back a while
		}
		select {
		case <-poll.C:
		case <-deadline:
			panic("the tail was held back for a minute")
		}
	}
	// Output:
	// Row {"n": 0}
	// Row {"n": 2}
}
