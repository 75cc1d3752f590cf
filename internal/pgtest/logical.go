package pgtest

import (
	"context"
	"errors"
	"sync"
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

var (
	logicalMu  sync.Mutex
	logicalSrv *pgserver.Server
	logicalErr error
)

// LogicalCluster returns the process's throwaway cluster with
// wal_level=logical (LogicalSettings), started on first use (a few
// seconds) and stopped by Main, for the tests of logical decoding readers
// outside package logical. It is shared: a test must not stop or crash it,
// and drops the replication slots its readers created. It skips the test
// when there are no local PostgreSQL binaries.
func LogicalCluster(tb testing.TB) *pgserver.Server {
	tb.Helper()
	logicalMu.Lock()
	defer logicalMu.Unlock()
	if logicalSrv == nil && logicalErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		logicalSrv, logicalErr = pgserver.StartThrowaway(ctx, pgserver.Options{Settings: LogicalSettings})
	}
	if errors.Is(logicalErr, pgserver.ErrNoBinaries) {
		tb.Skipf("pgtest: no wal_level=logical cluster: %v", logicalErr)
	}
	if logicalErr != nil {
		tb.Fatalf("pgtest: wal_level=logical cluster: %v", logicalErr)
	}
	return logicalSrv
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

// closeLogical stops the LogicalCluster, if one was started (Main).
func closeLogical() error {
	logicalMu.Lock()
	defer logicalMu.Unlock()
	if logicalSrv == nil {
		return nil
	}
	err := logicalSrv.Close()
	logicalSrv = nil
	return err
}
