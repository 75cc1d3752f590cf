package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/eventstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Request an effect twice (the second request creates nothing), run a worker
// until it is completed, and read its state.
func Example() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	defer pool.Close()
	schema := "pgdcb_example_effects_" + uuid.NewString()[:8]
	defer pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") //nolint:errcheck
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		fmt.Println(err)
		return
	}
	store, _ := eventstore.New(pool, &eventstore.Config{Schema: schema})
	queue, _ := effects.New(store, nil)

	req := effects.Request{Type: "send_message", Session: "user1:agent1:thread1",
		DedupeKey: "checkpoint-123/send_message", Payload: json.RawMessage(`{"content":"Hello"}`)}
	id, created, _ := queue.Request(ctx, req)
	again, createdAgain, _ := queue.Request(ctx, req)
	fmt.Println(created, createdAgain, again == id)

	sent := make(chan string, 1)
	worker, _ := effects.NewWorker(store, &effects.Config{Handlers: map[string]effects.Handler{
		"send_message": func(ctx context.Context, e effects.Effect) error {
			var p struct{ Content string }
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return err
			}
			sent <- p.Content // deliver it, idempotently on e.ID
			return nil
		},
	}})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- worker.Run(wctx) }()
	fmt.Println("sent:", <-sent)
	poll := time.NewTicker(10 * time.Millisecond) // until the effect is finished, for a minute at most
	defer poll.Stop()
	for deadline := time.After(time.Minute); ; {
		e, _ := queue.Effect(ctx, id)
		if e.Finished() {
			fmt.Println(e.State, e.Attempts)
			break
		}
		select {
		case <-poll.C:
		case <-deadline:
			panic("the effect did not finish")
		}
	}
	stop()
	<-done
	pending, _ := queue.Pending(ctx, "user1:agent1:thread1")
	fmt.Println(len(pending), worker.Stats().Executed)
	// Output:
	// true false true
	// sent: Hello
	// completed 1
	// 0 1
}
