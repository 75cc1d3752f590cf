package projection_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newStore returns a store in a fresh schema with a read model table rm
// (position, type) that has no unique constraint, so duplicates would show.
func newStore(t testing.TB) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t, pgtest.DSN(t))
	s := teststore.OnPool(t, pool, nil)
	_, err := pool.Exec(context.Background(), `CREATE TABLE `+ident.Schema(s)+`.rm (position bigint NOT NULL, type text NOT NULL)`)
	require.NoError(t, err)
	return s, pool
}

// storeOn is the same schema through another pool.
func storeOn(t testing.TB, pool *pgxpool.Pool, schema string) *eventstore.Store {
	s, err := eventstore.New(pool, &eventstore.Config{Schema: schema, GroupCommitDisabled: pgtest.GroupCommitDisabled()})
	require.NoError(t, err)
	return s
}

// insertRows is a handler writing one rm row per event.
func insertRows(schema string) func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
	return insertRowsInto(schema, "rm")
}

// insertRowsInto is insertRows into table.
func insertRowsInto(schema, table string) func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
	return func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		pos := make([]int64, len(evs))
		typ := make([]string, len(evs))
		for i, ev := range evs {
			pos[i], typ[i] = ev.Position, ev.Type
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.`+table+` (position, type) SELECT * FROM unnest($1::bigint[], $2::text[])`, pos, typ)
		return err
	}
}

func appendN(t testing.TB, s *eventstore.Store, typ string, n, per int) {
	t.Helper()
	for n > 0 {
		k := min(n, per)
		evs := make([]pgdcb.Event, k)
		for i := range evs {
			evs[i] = pgdcb.MustEvent(typ, map[string]int{"i": i}, fmt.Sprintf("k=%d", i%5))
		}
		_, err := s.Append(context.Background(), evs)
		require.NoError(t, err)
		n -= k
	}
}

// requireExactlyOnce: rm holds exactly one row per event of the types.
func requireExactlyOnce(t testing.TB, pool *pgxpool.Pool, s *eventstore.Store, want int) {
	t.Helper()
	var rows, distinct, events, missing int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT position) FROM `+ident.Schema(s)+`.rm`).Scan(&rows, &distinct))
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+ident.Schema(s)+`.events WHERE type = 'P'`).Scan(&events))
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+ident.Schema(s)+`.events e WHERE type = 'P'
		AND NOT EXISTS (SELECT 1 FROM `+ident.Schema(s)+`.rm r WHERE r.position = e.position)`).Scan(&missing))
	require.Equal(t, want, events, "events in the log")
	require.Equal(t, 0, missing, "events missing from the read model")
	require.Equal(t, distinct, rows, "duplicate rows in the read model")
	require.Equal(t, want, rows, "rows in the read model")
}

func rmCount(t testing.TB, pool *pgxpool.Pool, s *eventstore.Store) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+ident.Schema(s)+`.rm`).Scan(&n))
	return n
}
