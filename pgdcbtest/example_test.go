package pgdcbtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/query"
)

// A test gets a store of its own, appends through the code under test and
// asserts on the whole log. (In a real test, t is the *testing.T; a
// pgtest.Recorder stands in for it so that the example runs.)
func ExampleNewStore() {
	failures := (&pgtest.Recorder{}).Run(func(t testing.TB) {
		store := pgdcbtest.NewStore(t, nil) // fresh, migrated, dropped after the test
		ctx := context.Background()

		// The code under test: open a wallet unless it exists.
		opened := pgdcb.NewModel(query.Tagged([]string{"WalletOpened"}, "wallet=a"), false,
			func(bool, pgdcb.StoredEvent) bool { return true })
		cond, err := store.Project(ctx, opened)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if _, err := store.AppendIf(ctx, []pgdcb.Event{
			pgdcb.MustEvent("WalletOpened", map[string]string{"owner": "ann"}, "wallet=a"),
		}, cond); err != nil {
			t.Fatalf("%v", err)
		}

		log := pgdcbtest.ReadAll(t, store)
		pgdcbtest.RequireEvents(t, log, []pgdcb.Event{
			pgdcb.MustEvent("WalletOpened", map[string]string{"owner": "ann"}, "wallet=a"),
		})
		fmt.Println(len(log), "event in", store.Schema()[:len(pgdcbtest.SchemaPrefix)]+"…")
	})
	fmt.Println("failures:", failures)
	// Output:
	// 1 event in pgdcbtest_…
	// failures: []
}

// RequireEvents compares types, tags and (when given) data, and says what
// differs.
func ExampleDiffEvents() {
	got := []pgdcb.StoredEvent{{Event: pgdcb.MustEvent("MoneyDeposited", map[string]int{"amount": 5}, "wallet=a")}}
	fmt.Println(pgdcbtest.DiffEvents(got, []pgdcb.Event{
		pgdcb.MustEvent("MoneyDeposited", map[string]int{"amount": 10}, "wallet=a"),
	}))
	// Output:
	// events differ:
	//   event 0: MoneyDeposited: data {"amount":5}, want {"amount":10}
	// got:
	//   MoneyDeposited [wallet=a] {"amount":5}
	// want:
	//   MoneyDeposited [wallet=a] {"amount":10}
}
