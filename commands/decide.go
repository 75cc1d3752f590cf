package commands

import (
	"context"

	"github.com/jackc/pgx/v5"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// DecideContext gives a handler read access to the store: on PostgreSQL
// inside the attempt's transaction, on other stores (package memstore)
// straight from the store. It offers reads only: on PostgreSQL the append
// must be the transaction's first write (see eventstore.Store.AppendTx).
type DecideContext struct {
	// Command is the command being decided, with its ID filled in.
	Command Command
	// Attempt is 1 for the first decision, 2 after the first conflict, ….
	Attempt int

	r reader
	// readErr is the first error a read through this context returned: the
	// store failed, so the handler's error (if any) is not a rejection.
	readErr error
}

// reader is what a DecideContext reads through: the attempt's transaction
// on PostgreSQL (txReader), the store itself on others.
type reader interface {
	Project(ctx context.Context, projectors ...pgdcb.Projector) (appendif.Condition, error)
	ReadAll(ctx context.Context, q query.Query, opts *pgdcb.ReadOptions) ([]pgdcb.StoredEvent, cursor.Cursor, error)
	ReadLast(ctx context.Context, q query.Query) (*pgdcb.StoredEvent, cursor.Cursor, error)
	Head(ctx context.Context) (cursor.Cursor, error)
}

// txReader reads in a PostgreSQL transaction.
type txReader struct {
	store *eventstore.Store
	tx    pgx.Tx
}

func (r txReader) Project(ctx context.Context, projectors ...pgdcb.Projector) (appendif.Condition, error) {
	return r.store.ProjectTx(ctx, r.tx, projectors...)
}

func (r txReader) ReadAll(ctx context.Context, q query.Query, opts *pgdcb.ReadOptions) ([]pgdcb.StoredEvent, cursor.Cursor, error) {
	return r.store.ReadAllTx(ctx, r.tx, q, opts)
}

func (r txReader) ReadLast(ctx context.Context, q query.Query) (*pgdcb.StoredEvent, cursor.Cursor, error) {
	return r.store.ReadLastTx(ctx, r.tx, q)
}

func (r txReader) Head(ctx context.Context) (cursor.Cursor, error) { return r.store.HeadTx(ctx, r.tx) }

// read records err as the context's read failure.
func (d *DecideContext) read(err error) error {
	if err != nil && d.readErr == nil {
		d.readErr = err
	}
	return err
}

// Project folds the events of the projectors' queries, in one snapshot, and
// returns the condition to append with (see eventstore.Store.Project).
func (d *DecideContext) Project(ctx context.Context, projectors ...pgdcb.Projector) (appendif.Condition, error) {
	c, err := d.r.Project(ctx, projectors...)
	return c, d.read(err)
}

// ReadAll reads the matching events and the decision cursor (see
// eventstore.Store.ReadAll).
func (d *DecideContext) ReadAll(ctx context.Context, q query.Query, opts *pgdcb.ReadOptions) ([]pgdcb.StoredEvent, cursor.Cursor, error) {
	evs, c, err := d.r.ReadAll(ctx, q, opts)
	return evs, c, d.read(err)
}

// ReadLast returns the last matching event and the decision cursor (see
// eventstore.Store.ReadLast).
func (d *DecideContext) ReadLast(ctx context.Context, q query.Query) (*pgdcb.StoredEvent, cursor.Cursor, error) {
	ev, c, err := d.r.ReadLast(ctx, q)
	return ev, c, d.read(err)
}

// Head returns a cursor at the end of the log in a fresh snapshot.
func (d *DecideContext) Head(ctx context.Context) (cursor.Cursor, error) {
	c, err := d.r.Head(ctx)
	return c, d.read(err)
}
