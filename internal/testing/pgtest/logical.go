package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/pgserver"
)

// LogicalSettings are the settings of the LogicalCluster: logical decoding,
// and commits that are flushed before they are acknowledged (a WAL sender
// sends only flushed WAL; throwaway clusters turn synchronous_commit off).
var LogicalSettings = map[string]string{
	"wal_level":             "logical",
	"max_replication_slots": "40",
	"max_wal_senders":       "40",
	"synchronous_commit":    "on",
	"max_connections":       "100",
}

var sharedLogical = shared[*pgserver.Server]{what: "wal_level=logical cluster", start: func(ctx context.Context) (*pgserver.Server, error) {
	return pgserver.StartThrowaway(ctx, pgserver.Options{Settings: LogicalSettings})
}}

// LogicalCluster returns the process's throwaway cluster with
// wal_level=logical (LogicalSettings), started on first use (a few
// seconds) and stopped by Main, for the tests of logical decoding readers
// outside package logical. It is shared: a test must not stop or crash it,
// and drops the replication slots its readers created. It skips the test
// when there are no local PostgreSQL binaries.
func LogicalCluster(tb testing.TB) *pgserver.Server {
	tb.Helper()
	return sharedLogical.get(tb)
}

// LogicalPool returns a new pool on the LogicalCluster, closed when the
// test ends.
func LogicalPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := NewPool(ctx, LogicalCluster(tb).DSN())
	if err != nil {
		tb.Fatalf("pgtest: pool on the wal_level=logical cluster: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// LogicalSchema is Schema on the LogicalCluster.
func LogicalSchema(tb testing.TB) string {
	tb.Helper()
	return schemaOn(tb, LogicalCluster(tb).DSN())
}
