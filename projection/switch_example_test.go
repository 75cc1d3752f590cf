package projection_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// A blue/green rebuild: version 2 of a read model is built beside version 1
// from the start of the log, then Switch makes the view readers read show
// it. Each version registers its table (so that any reset empties it) and
// the view.
func ExampleSwitch() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "pgdcb_test_example_switch_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	var last pgdcb.AppendResult
	for _, c := range []string{"c1", "c1", "c2"} {
		if last, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", map[string]string{}, "course="+c)}); err != nil {
			panic(err)
		}
	}
	var running sync.WaitGroup
	// version runs version v of the read model: table course_sizes_v<v>,
	// read through the view course_sizes.
	version := func(v int, ctx context.Context) *projection.Runner {
		table := fmt.Sprintf("course_sizes_v%d", v)
		if _, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.`+table+` (course text PRIMARY KEY, students int NOT NULL)`); err != nil {
			panic(err)
		}
		r, err := projection.New(store, table, query.Tagged([]string{"StudentSubscribed"}),
			func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
				for _, ev := range evs {
					course, _ := ev.Tags.Get("course")
					if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.`+table+` AS t VALUES ($1, 1)
						ON CONFLICT (course) DO UPDATE SET students = t.students + 1`, course); err != nil {
						return err
					}
				}
				return nil
			},
			&projection.Config{Tables: []string{table}, Views: []string{"course_sizes"},
				ReaderConfig: projection.ReaderConfig{PollInterval: 20 * time.Millisecond}})
		if err != nil {
			panic(err)
		}
		running.Go(func() { _ = r.Run(ctx) })
		return r
	}
	runCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); running.Wait() }()
	switchCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v1 := version(1, runCtx) // the first to run serves the view
	if err := v1.WaitFor(switchCtx, last.Cursor()); err != nil {
		panic(err)
	}
	v2 := version(2, runCtx)
	retry := time.NewTicker(10 * time.Millisecond)
	defer retry.Stop()
	for {
		// Switch waits until version 2 holds what version 1 holds; it
		// needs version 2's checkpoint, made when it first runs.
		err := projection.Switch(switchCtx, store, v2.Name())
		if err == nil {
			break
		}
		if !errors.Is(err, projection.ErrNotFound) {
			panic(err)
		}
		select {
		case <-retry.C:
		case <-switchCtx.Done():
			panic(switchCtx.Err())
		}
	}
	var serving string
	if err := pool.QueryRow(ctx, `SELECT projection FROM `+schema+`.read_model_views`).Scan(&serving); err != nil {
		panic(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT students FROM `+schema+`.course_sizes WHERE course = 'c1'`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println(serving, "c1", n)
	// Output:
	// course_sizes_v2 c1 2
}
