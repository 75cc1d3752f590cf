package logical_test

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// A projection in the logical decoding mode: the handler is the same as in
// the default mode; only the Config changes. The server needs
// wal_level=logical and the role REPLICATION. When the projection is removed
// for good, drop its slot, or it retains WAL for ever.
func Example() {
	ctx := context.Background()
	var store *eventstore.Store // eventstore.New(pool, nil)
	if store == nil {
		return // (a store on a server with wal_level=logical)
	}
	h := func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		return nil // write the read model in tx
	}
	r, err := projection.New(store, "balances", query.All(), h, &projection.Config{Logical: &logical.Config{}})
	if err != nil {
		panic(err)
	}
	go r.Run(ctx)

	// Later, when the projection is deleted:
	_ = logical.DropSlot(ctx, store.Pool(), logical.SlotName(store.Schema(), "balances"))
}

// A subscription in the logical decoding mode: RunLogical resumes from the
// checkpoint and cursor the handler stored (the zero Checkpoint and
// cursor.Start the first time). Store both durably, with what the handler
// did, before it returns.
func Example_subscription() {
	ctx := context.Background()
	var store *eventstore.Store // eventstore.New(pool, nil)
	if store == nil {
		return // (a store on a server with wal_level=logical)
	}
	sub, err := subscription.New(store, query.All(), &subscription.Config{Name: "mailer", Logical: &logical.Config{}})
	if err != nil {
		panic(err)
	}
	var (
		from logical.Checkpoint // logical.ParseCheckpoint(stored text)
		tail cursor.Cursor      // the stored cursor
	)
	err = sub.RunLogical(ctx, from, tail, func(ctx context.Context, b subscription.Batch) error {
		// Handle b.Events (commit order; may be empty), then store
		// b.Checkpoint.String() and b.Cursor together.
		return nil
	})
	_ = err // ctx's error, a *subscription.HandlerError, or logical.ErrSlotLost
}
