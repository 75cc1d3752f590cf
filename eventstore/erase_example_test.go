package eventstore_test

import (
	"context"
	"crypto/rand"
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

// A personal field is sealed at append and read back in clear until its
// subject is erased; then it reads as null, the rest of the event intact.
func ExampleStore_Erase() {
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
	kek := make([]byte, 32) // in production: from a secret store, or a KeyWrapper over a KMS
	rand.Read(kek)
	wrapper, err := eventstore.NewAESKeyWrapper(kek)
	if err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema, KEK: wrapper})
	if err != nil {
		panic(err)
	}
	defer store.Close(ctx)

	_, err = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("WalletOpened",
		map[string]any{"wallet": "w1", "owner": pgdcb.Personal("user-42", "Ada Lovelace")}, "wallet=w1")})
	if err != nil {
		panic(err)
	}
	show := func() {
		evs, _, err := store.ReadAll(ctx, query.Tagged(nil, "wallet=w1"), nil)
		if err != nil {
			panic(err)
		}
		fmt.Println(string(evs[0].Data))
	}
	show()
	if _, err := store.Erase(ctx, "user-42"); err != nil {
		panic(err)
	}
	show()
	// Output:
	// {"owner": "Ada Lovelace", "wallet": "w1"}
	// {"owner": null, "wallet": "w1"}
}
