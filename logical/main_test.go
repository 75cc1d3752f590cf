package logical_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/logical"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// clusterSettings: logical decoding, and commits that are durable before
// they are visible (the throwaway default is synchronous_commit off).
var clusterSettings = pgtest.LogicalSettings

var (
	srv     *pgserver.Server // the package's throwaway cluster, shared by its tests
	skipWhy string
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := pgserver.StartThrowaway(ctx, pgserver.Options{Settings: clusterSettings})
	cancel()
	switch {
	case errors.Is(err, pgserver.ErrNoBinaries):
		skipWhy = "logical decoding tests need local PostgreSQL binaries (initdb, postgres) to start a cluster with wal_level=logical, and found none: " + err.Error()
	case err != nil:
		fmt.Fprintln(os.Stderr, "logical: starting the throwaway cluster:", err)
		os.Exit(1)
	default:
		srv = s
	}
	code := m.Run()
	if srv != nil {
		if err := srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "logical:", err)
		}
	}
	os.Exit(code)
}

// cluster returns the package's cluster (started again if a test crashed
// it), or skips the test when there are no PostgreSQL binaries.
func cluster(t testing.TB) *pgserver.Server {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if !srv.Running() {
		require.NoError(t, srv.Start(context.Background()))
	}
	return srv
}

func newPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(cluster(t).DSN())
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newStore migrates a fresh schema on the cluster; the schema and the slots
// of its readers are dropped when the test ends.
func newStore(t testing.TB) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t, 8)
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "logical_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !srv.Running() {
			_ = srv.Start(ctx)
		}
		conn, err := pgx.Connect(ctx, srv.DSN())
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		// Slots of this test (inactive once its readers stopped).
		_, _ = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
			WHERE NOT active AND slot_name = ANY($1)`, slotsOf[schema])
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	_, err := pgdcbsql.Migrate(t.Context(), pool, schema)
	require.NoError(t, err)
	s, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	return s, pool
}

// slotsOf lists the slot names a test used, per schema, for clean-up.
var slotsOf = map[string][]string{}

// useSlot records the default slot of reader name on store's schema for
// clean-up.
func useSlot(store *eventstore.Store, name string) string {
	s := logical.SlotName(store.Schema(), name)
	slotsOf[store.Schema()] = append(slotsOf[store.Schema()], s)
	return s
}

// dropSlot drops slot as an operator would, once the stopped reader's WAL
// sender has let go of it: Close waits for that at most 5 s, which a loaded
// machine can exceed (the slot is then still active, SQLSTATE 55006).
func dropSlot(t testing.TB, pool *pgxpool.Pool, slot string) {
	t.Helper()
	await.Until(t, deadline, func() (bool, string) {
		err := logical.DropSlot(context.Background(), pool, slot)
		return err == nil, fmt.Sprint(err)
	})
}

// holdXact opens a transaction on pool that holds a transaction id until
// the test ends (or it is rolled back), and returns it with that id.
func holdXact(t testing.TB, pool *pgxpool.Pool) (pgx.Tx, uint64) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var xid uint64
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT pg_current_xact_id()`).Scan(&xid))
	return tx, xid
}
