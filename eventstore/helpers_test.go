package eventstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
)

// newStore returns a store in a fresh schema, dropped when the test ends
// (teststore.New).
func newStore(t testing.TB, cfg *eventstore.Config) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	return teststore.New(t, cfg)
}
