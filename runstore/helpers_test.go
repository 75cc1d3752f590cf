package runstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/pgtest"
	"github.com/pgdcb/pgdcb/internal/teststore"
	"github.com/pgdcb/pgdcb/runstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore returns a runstore in a fresh schema (the core's migrations and
// runstore's), dropped when the test ends.
func newStore(t testing.TB, cfg *runstore.Config) *runstore.Store {
	t.Helper()
	es, pool := teststore.New(t, nil)
	_, err := runstore.Migrate(context.Background(), pool, es.Schema())
	require.NoError(t, err)
	s, err := runstore.New(es, cfg)
	require.NoError(t, err)
	return s
}
