package projection_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// A read model of subscriptions per course, updated exactly once per event:
// the handler's writes and the checkpoint commit together.
func ExampleRunner() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "pgdcb_test_example_proj_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.course_sizes (course text PRIMARY KEY, students int NOT NULL)`); err != nil {
		panic(err)
	}
	var last pgdcb.AppendResult
	for _, c := range []string{"c1", "c1", "c2"} {
		if last, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", map[string]string{}, "course="+c)}); err != nil {
			panic(err)
		}
	}

	r, err := projection.New(store, "course_sizes", query.Tagged([]string{"StudentSubscribed"}),
		func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
			for _, ev := range evs {
				course, _ := ev.Tags.Get("course")
				_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.course_sizes VALUES ($1, 1)
					ON CONFLICT (course) DO UPDATE SET students = course_sizes.students + 1`, course)
				if err != nil {
					return err
				}
			}
			return nil
		},
		&projection.Config{
			Reset: func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `TRUNCATE `+schema+`.course_sizes`)
				return err
			},
			ReaderConfig: projection.ReaderConfig{PollInterval: 50 * time.Millisecond},
		})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := r.WaitFor(wctx, last.Cursor()); err != nil { // the read model holds the last append
		panic(err)
	}
	cancel()
	<-done
	rows, _ := pool.Query(context.Background(), `SELECT course, students FROM `+schema+`.course_sizes ORDER BY course`)
	for rows.Next() {
		var c string
		var n int
		_ = rows.Scan(&c, &n)
		fmt.Println(c, n)
	}
	st, _ := r.Status(context.Background())
	fmt.Println(st.State)
	// Output:
	// c1 2
	// c2 1
	// ACTIVE
}

// Read your own writes: the command appends, then waits (with a deadline)
// until the projection has committed its event, and only then reads the
// read model — what an HTTP handler does before answering a GET that must
// show the client's own POST.
func ExampleRunner_WaitFor() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "pgdcb_test_example_wait_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.course_sizes (course text PRIMARY KEY, students int NOT NULL)`); err != nil {
		panic(err)
	}
	r, err := projection.New(store, "course_sizes", query.Tagged([]string{"StudentSubscribed"}),
		func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
			for _, ev := range evs {
				course, _ := ev.Tags.Get("course")
				_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.course_sizes VALUES ($1, 1)
					ON CONFLICT (course) DO UPDATE SET students = course_sizes.students + 1`, course)
				if err != nil {
					return err
				}
			}
			return nil
		}, nil)
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx) }()
	defer func() { stop(); <-done }()

	res, err := store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", map[string]string{}, "course=c1")})
	if err != nil {
		panic(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.WaitFor(waitCtx, res.Cursor()); err != nil {
		panic(err) // in a handler: answer 503 with Retry-After, or the stale model with a warning
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT students FROM `+schema+`.course_sizes WHERE course = 'c1'`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("c1", n)
	// Output:
	// c1 1
}
