package eventstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgtest"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// newStore returns a store in a fresh schema, dropped when the test ends.
func newStore(t testing.TB, cfg *eventstore.Config) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	_, err := pgdcbsql.Migrate(context.Background(), pool, schema)
	require.NoError(t, err)
	c := eventstore.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.Schema = schema
	if pgtest.GroupCommitDisabled() {
		c.GroupCommitDisabled = true
	}
	s, err := eventstore.New(pool, &c)
	require.NoError(t, err)
	return s, pool
}
