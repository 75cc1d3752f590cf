package runstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgtest"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore returns a runstore in a fresh schema, dropped when the test ends.
func newStore(t testing.TB, cfg *runstore.Config) *runstore.Store {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t)
	_, err := pgdcbsql.Migrate(context.Background(), pool, schema)
	require.NoError(t, err)
	es, err := eventstore.New(pool, &eventstore.Config{Schema: schema, GroupCommitDisabled: pgtest.GroupCommitDisabled()})
	require.NoError(t, err)
	s, err := runstore.New(es, cfg)
	require.NoError(t, err)
	return s
}
