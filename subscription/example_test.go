package subscription_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
	"github.com/pgdcb/pgdcb/subscription"
)

func ExampleSubscription_Run() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "pgdcb_test_example_sub_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	_, err = store.Append(ctx, []pgdcb.Event{
		pgdcb.MustEvent("CourseDefined", map[string]int{"capacity": 10}, "course=c1"),
		pgdcb.MustEvent("StudentSubscribed", map[string]string{"student": "s1"}, "course=c1", "student=s1"),
		pgdcb.MustEvent("StudentSubscribed", map[string]string{"student": "s2"}, "course=c1", "student=s2"),
	})
	if err != nil {
		panic(err)
	}

	sub, err := subscription.New(store, query.Tagged([]string{"StudentSubscribed"}, "course=c1"), nil)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	seen := 0
	err = sub.Run(ctx, cursor.Cursor{}, func(_ context.Context, b subscription.Batch) error {
		for _, ev := range b.Events {
			student, _ := ev.Tags.Get("student")
			fmt.Println(ev.Type, student)
			seen++
		}
		// Persist b.Cursor (b.Cursor.String()) to resume from here.
		if seen == 2 {
			cancel()
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// StudentSubscribed s1
	// StudentSubscribed s2
	// context canceled
}

// Read your own writes with an in-process read model fed by a subscription:
// append, wait until the subscription has handled the append, then read the
// model.
func ExampleSubscription_WaitFor() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "pgdcb_test_example_subwait_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	sub, err := subscription.New(store, query.Tagged([]string{"StudentSubscribed"}), nil)
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	students := map[string]int{} // the read model: students per course
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		done <- sub.Run(runCtx, cursor.Start, func(_ context.Context, b subscription.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range b.Events {
				course, _ := ev.Tags.Get("course")
				students[course]++
			}
			return nil
		})
	}()
	defer func() { stop(); <-done }()

	res, err := store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", map[string]string{}, "course=c1")})
	if err != nil {
		panic(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sub.WaitFor(waitCtx, res.Cursor()); err != nil {
		panic(err)
	}
	mu.Lock()
	fmt.Println("c1", students["c1"])
	mu.Unlock()
	// Output:
	// c1 1
}
