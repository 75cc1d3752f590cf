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
	// readErr is the first error a read through this context returned: the
	// store failed, so the handler's error (if any) is not a rejection.
	readErr error
}

// read records err as the context's read failure.
func (d *DecideContext) read(err error) error {
	if err != nil && d.readErr == nil {
		d.readErr = err
	}
	return err
}

// Project folds the events of the projectors' queries, in one snapshot, and
// returns the condition to append with (see eventstore.Store.Project).
func (d *DecideContext) Project(ctx context.Context, projectors ...eventstore.Projector) (appendif.Condition, error) {
	c, err := d.store.ProjectTx(ctx, d.tx, projectors...)
	return c, d.read(err)
}

// ReadAll reads the matching events and the decision cursor (see
// eventstore.Store.ReadAll).
func (d *DecideContext) ReadAll(ctx context.Context, q query.Query, opts *eventstore.ReadOptions) ([]eventstore.StoredEvent, cursor.Cursor, error) {
	evs, c, err := d.store.ReadAllTx(ctx, d.tx, q, opts)
	return evs, c, d.read(err)
}

// ReadLast returns the last matching event and the decision cursor (see
// eventstore.Store.ReadLast).
func (d *DecideContext) ReadLast(ctx context.Context, q query.Query) (*eventstore.StoredEvent, cursor.Cursor, error) {
	ev, c, err := d.store.ReadLastTx(ctx, d.tx, q)
	return ev, c, d.read(err)
}

// Head returns a cursor at the end of the log in a fresh snapshot.
func (d *DecideContext) Head(ctx context.Context) (cursor.Cursor, error) {
	c, err := d.store.HeadTx(ctx, d.tx)
	return c, d.read(err)
}
