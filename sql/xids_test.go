package sql_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// TestRebaseAfterRestore: a log restored into another cluster holds
// transaction ids the server has not handed out; CheckSchema says so, and
// RebaseTransactionIDs maps them below the counter keeping the log's order,
// the commands' links and the checkpoints' places, after which new appends
// sort after every stored event and a tail from a checkpoint delivers them.
func TestRebaseAfterRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, schema := migratedStore(t)
	q := ident.Schema(s)
	var err error

	// Events written here, then "restored" ones: four transactions far above
	// the server's counter, two events in one of them, each with its
	// command row; a projection has processed the first two.
	for i := range 3 {
		_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Local", i, "n=local")})
		require.NoError(t, err)
	}
	require.NoError(t, s.CheckSchema(ctx))
	_, err = pool.Exec(ctx, `
		WITH base AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 10000000 AS b)
		INSERT INTO `+q+`.events (transaction_id, type, tags, data)
		SELECT ((SELECT b FROM base) + t * 1000)::text::xid8, 'Restored', ARRAY['n=r' || t], jsonb_build_object('t', t)
		  FROM unnest(ARRAY[1, 2, 2, 3, 4]) AS t`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO `+q+`.commands (transaction_id, type, data)
		SELECT DISTINCT transaction_id, 'Cmd', jsonb_build_object('tx', transaction_id::text) FROM `+q+`.events WHERE type = 'Restored'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO `+q+`.checkpoints (name, transaction_id, position)
		SELECT 'proj', transaction_id, position FROM `+q+`.events WHERE type = 'Restored' ORDER BY transaction_id, position OFFSET 2 LIMIT 1`)
	require.NoError(t, err)

	err = s.CheckSchema(ctx)
	require.ErrorIs(t, err, pgdcb.ErrTransactionIDsAhead)
	var ahead *pgdcbsql.TransactionIDsAheadError
	require.ErrorAs(t, err, &ahead)
	require.Greater(t, ahead.Stored, ahead.Next)

	order := func() (positions []int64, links map[int64]string) {
		rows, err := pool.Query(ctx, `SELECT e.position, coalesce(c.data->>'tx', '') FROM `+q+`.events e
			LEFT JOIN `+q+`.commands c ON c.transaction_id = e.transaction_id ORDER BY e.transaction_id, e.position`)
		require.NoError(t, err)
		defer rows.Close()
		links = map[int64]string{}
		for rows.Next() {
			var p int64
			var l string
			require.NoError(t, rows.Scan(&p, &l))
			positions = append(positions, p)
			links[p] = l
		}
		require.NoError(t, rows.Err())
		return positions, links
	}
	before, linksBefore := order()

	ids, _, err := pgdcbsql.RebaseTransactionIDs(ctx, pool, schema)
	require.NoError(t, err)
	require.EqualValues(t, 7, ids, "3 local transactions and 4 restored ones")
	require.NoError(t, s.CheckSchema(ctx))
	after, linksAfter := order()
	require.Equal(t, before, after, "the log's order is kept")
	require.Equal(t, linksBefore, linksAfter, "each command stays with its events")

	// The checkpoint still sits after the second restored event: a tail from
	// it delivers the other two, then an event appended now, last.
	var cp cursor.Cursor
	require.NoError(t, pool.QueryRow(ctx, `SELECT transaction_id::text::bigint, position FROM `+q+`.checkpoints WHERE name = 'proj'`).
		Scan(&cp.TransactionID, &cp.Position))
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("New", 1, "n=new")})
	require.NoError(t, err)
	var got []string
	require.Eventually(t, func() bool {
		b, err := s.ReadTail(ctx, query.All(), cp, 100)
		if err != nil {
			t.Log(err)
			return false
		}
		got = got[:0]
		for _, e := range b.Events {
			got = append(got, e.Tags.Strings()[0])
		}
		return len(got) == 3
	}, time.Minute, 20*time.Millisecond, "the tail from the checkpoint") // behind the shared server's horizon
	require.Equal(t, []string{"n=r3", "n=r4", "n=new"}, got)
}

// TestRebaseUpdatesOnlyTransactionIDs: the append-only trigger lets an UPDATE
// through only inside the rebase, and only of transaction_id.
func TestRebaseUpdatesOnlyTransactionIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := migratedStore(t)
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("E", 1, "n=1")})
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, `SELECT set_config('pgdcb.allow_rebase', 'on', true)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE `+ident.Schema(s)+`.events SET data = '{"forged": true}'`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, pgcode.AppendOnly, pgErr.Code)
}

// TestBurnTransactionIDs: the counter advances by at least as many ids as
// asked (other sessions may take some too).
func TestBurnTransactionIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	next := func() (n int64) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&n))
		return n
	}
	from := next()
	require.NoError(t, pgdcbsql.BurnTransactionIDs(ctx, conn.Conn(), 2500))
	require.GreaterOrEqual(t, next()-from, int64(2500))
}

// migratedStore returns a store (NotifyDisabled) in a fresh migrated schema.
func migratedStore(t *testing.T) (*eventstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	s := pgdcbtest.NewStore(t, &pgdcbtest.Options{Config: &eventstore.Config{NotifyDisabled: true}, OwnPool: true})
	return s, s.Pool(), s.Schema()
}
