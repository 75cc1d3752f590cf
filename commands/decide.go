package commands

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/appendif"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// DecideContext gives a handler read access to the store inside the attempt's
// transaction. It offers reads only: the append must be the transaction's first
// write (see eventstore.Store.AppendTx).
type DecideContext struct {
	// Command is the command being decided, with its ID filled in.
	Command Command
	// Attempt is 1 for the first decision, 2 after the first conflict, ….
	Attempt int

	store *eventstore.Store
	tx    pgx.Tx
}

// Project folds the events of the projectors' queries, in one snapshot, and
// returns the condition to append with (see eventstore.Store.Project).
func (d *DecideContext) Project(ctx context.Context, projectors ...eventstore.Projector) (appendif.Condition, error) {
	return d.store.ProjectTx(ctx, d.tx, projectors...)
}

// ReadAll reads the matching events and the decision cursor (see
// eventstore.Store.ReadAll).
func (d *DecideContext) ReadAll(ctx context.Context, q query.Query, opts *eventstore.ReadOptions) ([]eventstore.StoredEvent, cursor.Cursor, error) {
	return d.store.ReadAllTx(ctx, d.tx, q, opts)
}

// ReadLast returns the last matching event and the decision cursor (see
// eventstore.Store.ReadLast).
func (d *DecideContext) ReadLast(ctx context.Context, q query.Query) (*eventstore.StoredEvent, cursor.Cursor, error) {
	return d.store.ReadLastTx(ctx, d.tx, q)
}

// Head returns a cursor at the end of the log in a fresh snapshot.
func (d *DecideContext) Head(ctx context.Context) (cursor.Cursor, error) {
	return d.store.HeadTx(ctx, d.tx)
}
