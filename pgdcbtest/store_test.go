package pgdcbtest_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func schemaExists(t *testing.T, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pgdcbtest.Pool(t).QueryRow(t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&ok))
	return ok
}

// requireDropped waits for the background drop of a schema.
func requireDropped(t *testing.T, name string) {
	t.Helper()
	require.Eventually(t, func() bool { return !schemaExists(t, name) }, 30*time.Second, 10*time.Millisecond,
		"schema %s is dropped after its test", name)
}

func TestNewStoreIsFreshMigratedAndDropped(t *testing.T) {
	t.Parallel()
	var schema string
	t.Run("inner", func(t *testing.T) {
		store := pgdcbtest.NewStore(t, nil)
		schema = store.Schema()
		require.True(t, strings.HasPrefix(schema, pgdcbtest.SchemaPrefix+pgdcbtest.Token(t)+"_"), schema)
		require.NoError(t, store.CheckSchema(t.Context()))
		require.Empty(t, pgdcbtest.ReadAll(t, store))
		_, err := store.Append(t.Context(), []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "wallet=a")})
		require.NoError(t, err)
		require.Len(t, pgdcbtest.ReadAll(t, store), 1)
		require.True(t, schemaExists(t, schema))
	})
	requireDropped(t, schema)
}

func TestNewStoreParallelTestsGetTheirOwnSchemas(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{}
	t.Run("group", func(t *testing.T) {
		for i := range 8 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				store := pgdcbtest.NewStore(t, nil)
				mu.Lock()
				require.False(t, seen[store.Schema()], "schema handed out twice")
				seen[store.Schema()] = true
				mu.Unlock()
				// Each sees only its own events.
				_, err := store.Append(t.Context(), []pgdcb.Event{pgdcb.MustEvent("E", nil, fmt.Sprintf("test=%d", i))})
				require.NoError(t, err)
				pgdcbtest.RequireEvents(t, pgdcbtest.ReadAll(t, store),
					[]pgdcb.Event{pgdcb.MustEvent("E", nil, fmt.Sprintf("test=%d", i))})
			})
		}
	})
	require.Len(t, seen, 8)
	for s := range seen {
		requireDropped(t, s)
	}
}

func TestNewStoreOptions(t *testing.T) {
	t.Parallel()
	store := pgdcbtest.NewStore(t, &pgdcbtest.Options{Config: &eventstore.Config{MaxBatchSize: 2}, OwnPool: true})
	require.Equal(t, 2, store.Config().MaxBatchSize)
	require.NotSame(t, pgdcbtest.Pool(t), store.Pool())
	require.Same(t, pgdcbtest.Pool(t), pgdcbtest.NewStore(t, nil).Pool())

	failures := (&pgtest.Recorder{TB: t}).Run(func(ft testing.TB) {
		pgdcbtest.NewStore(ft, &pgdcbtest.Options{Config: &eventstore.Config{Schema: "mine"}})
	})
	require.Len(t, failures, 1)
	require.Contains(t, failures[0], `Options.Config.Schema must be empty (got "mine")`)

	failures = (&pgtest.Recorder{TB: t}).Run(func(ft testing.TB) {
		pgdcbtest.NewStore(ft, &pgdcbtest.Options{Config: &eventstore.Config{MaxBatchSize: -1}})
	})
	require.Len(t, failures, 1)
	require.Contains(t, failures[0], "MaxBatchSize")
}

// Options.Runstore adds runstore's migrations; without it the schema has the
// core's alone.
func TestNewStoreRunstore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	plain := pgdcbtest.NewStore(t, nil)
	bare, err := runstore.New(plain, nil)
	require.NoError(t, err)
	require.ErrorIs(t, bare.CheckSchema(ctx), pgdcb.ErrNotMigrated)

	store := pgdcbtest.NewStore(t, &pgdcbtest.Options{Runstore: true})
	rs, err := runstore.New(store, nil)
	require.NoError(t, err)
	require.NoError(t, rs.CheckSchema(ctx))
	res, err := rs.AppendEvent(ctx, runstore.CanonicalEngineEvent{RunID: "r1", EventType: "RunStarted", IdempotencyKey: "k1",
		EventData: []byte(`{}`), EmittedAt: "2026-02-11T10:00:00.123Z"})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.RunSeq)
}

// Schemas of a binary that is gone (its ownership lock is free) are swept;
// those of a binary still running (lock held) are not.
func TestSweepDropsOnlyOrphans(t *testing.T) {
	ctx := t.Context()
	pool := pgdcbtest.Pool(t)
	dead, alive := "0dead000", "0a11e000"
	deadSchema := pgdcbtest.SchemaPrefix + dead + "_00000001"
	aliveSchema := pgdcbtest.SchemaPrefix + alive + "_00000001"
	// The lock first: the background sweep of this binary's first store may
	// be running now, and must find the running binary's schema locked.
	holder, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer holder.Close(context.Background())
	_, err = holder.Exec(ctx, "SELECT pg_advisory_lock($1)", pgdcbtest.OwnerKey(alive))
	require.NoError(t, err)
	for _, s := range []string{deadSchema, aliveSchema} {
		_, err := pool.Exec(ctx, "CREATE SCHEMA "+s)
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+s) })
	}

	pgdcbtest.Sweep(t)
	require.False(t, schemaExists(t, deadSchema), "an orphan is dropped")
	require.True(t, schemaExists(t, aliveSchema), "a running binary's schema is kept")
}

// The median time a test waits for NewStore (schema hand-out, store,
// cleanup registration) against the old way (a fresh schema, sql.Migrate,
// DROP SCHEMA at the end), each iteration being one test that appends and
// reads one event. ms/median is the reported figure; ms/min is the
// hand-out alone, when a spare was ready.
func BenchmarkNewStore(b *testing.B) {
	body := func(t testing.TB, store *eventstore.Store) {
		if _, err := store.Append(context.Background(), []pgdcb.Event{pgdcb.MustEvent("E", nil, "k=v")}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.ReadAll(context.Background(), query.All(), nil); err != nil {
			t.Fatal(err)
		}
	}
	b.Run("pgdcbtest", func(b *testing.B) {
		pgdcbtest.NewStore(b, nil) // start the workers outside the measure
		var d []time.Duration
		for b.Loop() {
			(&pgtest.Recorder{TB: b}).Run(func(ft testing.TB) {
				start := time.Now()
				store := pgdcbtest.NewStore(ft, nil)
				d = append(d, time.Since(start))
				body(ft, store)
			})
		}
		reportMedian(b, d)
	})
	b.Run("migrate", func(b *testing.B) {
		pool := pgtest.Pool(b)
		var d []time.Duration
		for b.Loop() {
			(&pgtest.Recorder{TB: b}).Run(func(ft testing.TB) {
				start := time.Now()
				store := teststore.OnPool(ft, pool, nil)
				d = append(d, time.Since(start))
				body(ft, store)
			})
		}
		reportMedian(b, d)
	})
}

// reportMedian reports the median wait and the shortest (a spare was
// ready: the hand-out alone).
func reportMedian(b *testing.B, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "ms/median")
	b.ReportMetric(float64(d[0].Microseconds())/1000, "ms/min")
}
