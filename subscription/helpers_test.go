package subscription_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore returns a store in a fresh schema over a pool of its own whose
// connections carry application_name appName (so a test can terminate them).
func newStore(t testing.TB, appName string) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.MaxConns = 12
	if appName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = appName
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return teststore.OnPool(t, pool, nil), pool
}

func appendN(t testing.TB, s *eventstore.Store, typ string, from, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 500)
		evs := make([]pgdcb.Event, k)
		for i := range evs {
			evs[i] = pgdcb.MustEvent(typ, map[string]int{"n": from + i}, fmt.Sprintf("item=%d", (from+i)%7))
		}
		_, err := s.Append(context.Background(), evs)
		require.NoError(t, err)
		from += k
		n -= k
	}
}

func pgtestPool(t *testing.T) *pgxpool.Pool { return pgtest.Pool(t) }
