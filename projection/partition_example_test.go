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

// Wallet balances split by the tag wallet into 4 partitions, served by two
// workers (run each in a process of its own in production): a wallet's
// deposits are applied in log order, by one worker at a time.
func ExampleNewPartitioned() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "pgdcb_test_example_part_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.balances (wallet text PRIMARY KEY, cents int NOT NULL)`); err != nil {
		panic(err)
	}
	for i := range 20 {
		ev := pgdcb.MustEvent("Deposited", map[string]int{"cents": 100}, fmt.Sprintf("wallet=w%d", i%5))
		if _, err := store.Append(ctx, []pgdcb.Event{ev}); err != nil {
			panic(err)
		}
	}
	apply := func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		for _, ev := range evs {
			wallet, _ := ev.Tags.Get("wallet")
			if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.balances VALUES ($1, 100)
				ON CONFLICT (wallet) DO UPDATE SET cents = balances.cents + 100`, wallet); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	for range 2 {
		w, err := projection.NewPartitioned(store, "balances", query.Tagged([]string{"Deposited"}), apply,
			&projection.PartitionConfig{Key: "wallet", Partitions: 4, Lease: time.Second,
				ReaderConfig: projection.ReaderConfig{PollInterval: 20 * time.Millisecond}})
		if err != nil {
			panic(err)
		}
		go func() { done <- w.Run(ctx) }()
	}
	// Poll the read model until it holds every deposit (or a minute passed).
	poll := time.NewTicker(10 * time.Millisecond)
	deadline := time.After(time.Minute)
	for total := 0; total < 2000; {
		select {
		case <-poll.C:
		case <-deadline:
			panic("the read model did not catch up")
		}
		_ = pool.QueryRow(ctx, `SELECT coalesce(sum(cents), 0) FROM `+schema+`.balances`).Scan(&total)
	}
	poll.Stop()
	cancel()
	<-done
	<-done
	rows, _ := pool.Query(context.Background(), `SELECT wallet, cents FROM `+schema+`.balances ORDER BY wallet`)
	for rows.Next() {
		var w string
		var c int
		_ = rows.Scan(&w, &c)
		fmt.Println(w, c)
	}
	// Output:
	// w0 400
	// w1 400
	// w2 400
	// w3 400
	// w4 400
}
