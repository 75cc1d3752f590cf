package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Copying a log into another store as a restore does: one transaction per
// source transaction, each event with its recorded time. Positions and
// transaction ids are the target's.
func ExampleStore_ImportTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	open := func(name string) *eventstore.Store {
		schema := fmt.Sprintf("pgdcb_example_%s_%d", name, time.Now().UnixNano())
		if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
			panic(err)
		}
		s, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
		if err != nil {
			panic(err)
		}
		return s
	}
	src, dst := open("src"), open("dst")
	defer pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{src.Schema()}.Sanitize()+", "+pgx.Identifier{dst.Schema()}.Sanitize()+" CASCADE")

	src.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "account=a"), pgdcb.MustEvent("Deposited", 10, "account=a")})
	src.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Withdrawn", 3, "account=a")})

	// The source's events, one batch per transaction (ReadTail pages
	// through the log the same way).
	events, _, err := src.ReadAll(ctx, query.All(), nil)
	if err != nil {
		panic(err)
	}
	for i := 0; i < len(events); {
		j := i
		for j < len(events) && events[j].TransactionID == events[i].TransactionID {
			j++
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := dst.ImportTx(ctx, tx, events[i:j])
			return err
		})
		if err != nil {
			panic(err)
		}
		i = j
	}

	copied, _, err := dst.ReadAll(ctx, query.All(), nil)
	if err != nil {
		panic(err)
	}
	for i, e := range copied {
		fmt.Println(e.Type, "same time:", e.OccurredAt.Equal(events[i].OccurredAt),
			"same transaction as the one before:", i > 0 && e.TransactionID == copied[i-1].TransactionID)
	}
	// Output:
	// Opened same time: true same transaction as the one before: false
	// Deposited same time: true same transaction as the one before: true
	// Withdrawn same time: true same transaction as the one before: false
}
