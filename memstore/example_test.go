package memstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/query"
)

// The eventstore example without a server: a course of capacity 1 and two
// students deciding at the same moment; the second AppendIf fails because the
// first one's event matches its condition. Code written against
// pgdcb.Store runs unchanged on the PostgreSQL store.
func Example() {
	ctx := context.Background()
	var store pgdcb.Store = memstore.MustNew(nil)

	store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("CourseDefined", map[string]int{"capacity": 1}, "course=c1")})

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

	_, err := store.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", nil, "course=c1", "student=alice")}, aliceCond)
	fmt.Println("alice subscribes:", err)
	_, err = store.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("StudentSubscribed", nil, "course=c1", "student=bob")}, bobCond)
	fmt.Println("bob subscribes, condition failed:", errors.Is(err, pgdcb.ErrConditionFailed))

	// Output:
	// seats taken seen by alice: 0 by bob: 0
	// alice subscribes: <nil>
	// bob subscribes, condition failed: true
}
