package gettingstarted

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Open connects, migrates the schema (idempotent, safe to run from several
// processes at once) and returns the store. When done, close the store
// (store.Close(ctx) waits for its appends and background writes), then the
// pool.
func Open(ctx context.Context, dsn, schema string) (*eventstore.Store, *pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, nil, err
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return store, pool, nil
}
