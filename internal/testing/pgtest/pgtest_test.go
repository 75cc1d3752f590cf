package pgtest_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMainExportsDSN(t *testing.T) {
	t.Parallel()
	require.Equal(t, pgtest.DSN(t), os.Getenv("PGDCB_TEST_DATABASE_URL"))
}

func TestPool(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	require.EqualValues(t, pgtest.DefaultMaxConns, pool.Config().MaxConns)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT 1").Scan(&n))
	require.Equal(t, 1, n)
}

func schemaExists(t *testing.T, name string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.DSN(t))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var ok bool
	require.NoError(t, conn.QueryRow(t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&ok))
	return ok
}

func TestSchemaIsUniqueAndDropped(t *testing.T) {
	t.Parallel()
	var created, untouched string
	t.Run("inner", func(t *testing.T) {
		created, untouched = pgtest.Schema(t), pgtest.Schema(t)
		for _, s := range []string{created, untouched} {
			require.Regexp(t, regexp.MustCompile(`^pgdcb_test_[0-9a-f]{8}$`), s)
		}
		require.NotEqual(t, created, untouched)
		require.False(t, schemaExists(t, created), "Schema does not create the schema")

		pool := pgtest.Pool(t)
		_, err := pool.Exec(t.Context(), "CREATE SCHEMA "+created)
		require.NoError(t, err)
		_, err = pool.Exec(t.Context(), "CREATE TABLE "+created+".t (id int)")
		require.NoError(t, err)
		require.True(t, schemaExists(t, created))
	})
	require.False(t, schemaExists(t, created), "dropped with its objects when the test ended")
	require.False(t, schemaExists(t, untouched))
	require.True(t, schemaExists(t, "public"))
}

// Examples read the DSN that Main exported.
func Example() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&n); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n)
	// Output: 42
}
