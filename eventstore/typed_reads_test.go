package eventstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// With Config.TypedReadsGeneric, a read from the start of items with types
// and tags is planned once per connection (PostgreSQL keeps the generic
// plan, by the tag index) and reads what the default store reads, for one
// type, several types, several items and ReadLast. Without it the same
// statement shows its values to the planner.
func TestTypedReadsGeneric(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, &eventstore.Config{TypedReadsGeneric: true})
	plain, err := eventstore.New(pool, &eventstore.Config{Schema: s.Schema(), GroupCommitDisabled: true})
	require.NoError(t, err)
	loadEntities(t, s, pool, 20_000, 10)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, c := range []struct {
		name string
		q    func(i int) query.Query
		opts pgdcb.ReadOptions
		want int
	}{
		{name: "one type", q: func(i int) query.Query { return query.Tagged([]string{"Deposited"}, fmt.Sprintf("account=%d", i)) }, want: 9},
		{name: "two types", q: func(i int) query.Query {
			return query.Tagged([]string{"Opened", "Deposited"}, fmt.Sprintf("account=%d", i))
		}, want: 10},
		{name: "two items", q: func(i int) query.Query {
			return query.Tagged([]string{"Opened"}, fmt.Sprintf("account=%d", i)).
				Or(query.Tagged([]string{"Deposited"}, fmt.Sprintf("account=%d", i+1), fmt.Sprintf("shard=%d", ((i+1)*10+1)%16)))
		}, want: 2},
		{name: "ReadLast", q: func(i int) query.Query { return query.Tagged([]string{"Deposited"}, fmt.Sprintf("account=%d", i)) },
			opts: pgdcb.ReadOptions{Backwards: true, Limit: 1}, want: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range 8 {
				tx, err := conn.Begin(ctx)
				require.NoError(t, err)
				evs, _, err := s.ReadAllTx(ctx, tx, c.q(100+i), &c.opts)
				require.NoError(t, err)
				require.Len(t, evs, c.want)
				want, _, err := plain.ReadAllTx(ctx, tx, c.q(100+i), &c.opts)
				require.NoError(t, err)
				require.Equal(t, positions(want), positions(evs), "the same events as the default store")
				require.NoError(t, tx.Rollback(ctx))
			}
			sql, a := eventstore.ReadSQL(s, c.q(1), c.opts)
			require.Contains(t, sql, "(SELECT $", "the values go through subqueries")
			requireGenericTagPlan(t, conn, sql, a)

			plainSQL, _ := eventstore.ReadSQL(plain, c.q(1), c.opts)
			require.NotEqual(t, sql, plainSQL, "the default store shows its typed items' values")
		})
	}
}
