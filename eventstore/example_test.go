package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// A course of capacity 1 and two students deciding at the same moment: the
// second AppendIf fails because the first one's event matches its condition.
func Example() {
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

	store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("CourseDefined", map[string]int{"capacity": 1}, "course=c1")})

	// A student's decision: how many seats are taken, and the condition under
	// which that answer still holds.
	decide := func() (int, appendif.Condition) {
		subs := pgdcb.NewModel(query.Tagged([]string{"StudentSubscribed"}, "course=c1"), 0,
			func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
		cond, err := store.Project(ctx, subs)
		if err != nil {
			panic(err)
		}
		return subs.State, cond
	}
	aliceSeen, aliceCond := decide()
	bobSeen, bobCond := decide()
	fmt.Println("seats taken seen by alice:", aliceSeen, "by bob:", bobSeen)

	_, err = store.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", nil, "course=c1", "student=alice")}, aliceCond)
	fmt.Println("alice subscribes:", err)
	_, err = store.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", nil, "course=c1", "student=bob")}, bobCond)
	fmt.Println("bob subscribes, condition failed:", errors.Is(err, pgdcb.ErrConditionFailed))

	// Output:
	// seats taken seen by alice: 0 by bob: 0
	// alice subscribes: <nil>
	// bob subscribes, condition failed: true
}

// Close before closing the pool: it waits for the notification sent after the
// last append (and any snapshot write), so none of them meets a closed pool.
// Appends on the pool are refused from then on.
func ExampleStore_Close() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	schema := fmt.Sprintf("pgdcb_example_%d", time.Now().UnixNano())
	defer func() {
		cleanup, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
		if err == nil {
			cleanup.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			cleanup.Close()
		}
	}()
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	_, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "account=a1")})
	fmt.Println("append:", err)

	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fmt.Println("close:", store.Close(closeCtx))
	pool.Close()

	_, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "account=a2")})
	fmt.Println("append after close refused:", errors.Is(err, pgdcb.ErrClosed))

	// Output:
	// append: <nil>
	// close: <nil>
	// append after close refused: true
}

// A reader that LISTENs on a connection of its own registers first
// (ListenConn): appends send their NOTIFY only while some listener is
// registered, so that an append nobody waits for commits once.
func ExampleListenConn() {
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

	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := eventstore.ListenConn(ctx, conn, schema); err != nil {
		panic(err)
	}
	// Registered and listening: read the log once here (what committed
	// before was not notified), then wait.
	if _, err := store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Pinged", nil, "k=v")}); err != nil {
		panic(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("woken on the store's channel:", n.Channel == eventstore.NotifyChannel(schema))
	// Output:
	// woken on the store's channel: true
}

// Reads on a standby, appends on the primary, and read-your-writes with
// WaitFor. Here the "standby" pool is a second pool on the test server;
// point it at a hot standby in production (docs/REPLICAS.md).
func ExampleStore_WaitFor() {
	ctx := context.Background()
	dsn := os.Getenv("PGDCB_TEST_DATABASE_URL")
	primary, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer primary.Close()
	standby, err := pgxpool.New(ctx, dsn) // e.g. the standby's DSN
	if err != nil {
		panic(err)
	}
	defer standby.Close()
	schema := fmt.Sprintf("pgdcb_example_%d", time.Now().UnixNano())
	defer primary.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, primary, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(primary, &eventstore.Config{Schema: schema, ReadPool: standby})
	if err != nil {
		panic(err)
	}
	defer store.Close(ctx)

	res, err := store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 10, "account=a1")})
	if err != nil {
		panic(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := store.WaitFor(wctx, res.Cursor()); err != nil {
		panic(err)
	}
	evs, _, err := store.ReadAll(ctx, query.Tagged(nil, "account=a1"), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("the read shows the deposit:", len(evs) == 1)
	// Output:
	// the read shows the deposit: true
}
