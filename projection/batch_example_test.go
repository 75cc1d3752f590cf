package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// tenantCounter is a BatchHandler: it sees each page whole (here it only
// counts its events; a handler may also act on what lies beyond the page's
// horizon).
type tenantCounter struct{ seen int }

func (c *tenantCounter) HandleBatch(ctx context.Context, tx pgx.Tx, b pgdcb.TailBatch) error {
	c.seen += len(b.Events)
	return nil
}

// A projection of the events whose metadata names one tenant (no query of
// types and tags names them), brought up to date on demand with Step instead
// of Run.
func ExampleNewBatchRunner() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "pgdcb_test_example_batch_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	var last pgdcb.AppendResult
	for _, tenant := range []string{"a", "b", "a"} {
		ev := pgdcb.MustEvent("Visited", map[string]string{})
		ev.Metadata = json.RawMessage(`{"tenant": "` + tenant + `"}`)
		if last, err = store.Append(ctx, []pgdcb.Event{ev}); err != nil {
			panic(err)
		}
	}
	h := &tenantCounter{}
	r, err := projection.NewBatchRunner(store, "tenant_a_visits", query.All(), h,
		&projection.Config{MetadataContains: json.RawMessage(`{"tenant": "a"}`)})
	if err != nil {
		panic(err)
	}
	// Step until the checkpoint passes the last append (an open transaction
	// of the database may hold the tail back for a while).
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		st, err := r.Step(ctx)
		if err != nil {
			panic(err)
		}
		c, want := st.Batch.Cursor, last.Cursor()
		if st.Led && cursor.Compare(c.TransactionID, c.Position, want.TransactionID, want.Position) >= 0 {
			break
		}
		select {
		case <-ctx.Done():
			panic("the tail was held back for a minute")
		case <-time.After(10 * time.Millisecond):
		}
	}
	fmt.Println("tenant a:", h.seen)
	// Output:
	// tenant a: 2
}
