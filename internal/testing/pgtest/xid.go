package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// HeldXID is a transaction that holds a transaction id open until the test
// ends (or Release): what an `idle in transaction` session with a write does
// to tailing readers.
type HeldXID struct {
	// XID is its transaction id (pg_current_xact_id()).
	XID uint64
	// PID of its backend.
	PID int
	// Database it runs in.
	Database string

	conn *pgx.Conn
}

// DatabasePrefix starts the name of every database [OtherDatabase] creates.
const DatabasePrefix = "pgdcb_test_db_"

// OtherDatabase creates a throwaway database on the test server and returns
// a DSN for it; the database is dropped (WITH (FORCE)) when the test ends.
func OtherDatabase(tb testing.TB) string {
	tb.Helper()
	dsn := DSN(tb)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	name := DatabasePrefix + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("pgtest: dropping database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if !strings.HasPrefix(name, DatabasePrefix) {
			return
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return dsn + dbnameSuffix(dsn, name)
}

// dbnameSuffix names the database in a connection string: a later keyword
// overrides an earlier one in keyword/value form, and a URL's dbname
// parameter overrides its path.
func dbnameSuffix(conn, name string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		if strings.Contains(conn, "?") {
			return "&dbname=" + name
		}
		return "?dbname=" + name
	}
	return " dbname=" + name
}

// PoolOnOtherDatabase returns a pool on a throwaway database (OtherDatabase),
// closed when the test ends, and the database's DSN. A store built on it
// (teststore.OnPool) sees no transaction of the tests of other packages that
// share the server: they run in the default database.
func PoolOnOtherDatabase(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	dsn := OtherDatabase(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := NewPool(ctx, dsn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool, dsn
}

// HoldXID opens a transaction on dsn (a DSN of the test server, of any of its
// databases), gives it a transaction id and keeps it open, idle, until the
// test ends or Release is called.
func HoldXID(tb testing.TB, dsn string) *HeldXID {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("pgtest: hold xid: %v", err)
	}
	h := &HeldXID{conn: conn}
	tb.Cleanup(h.Release)
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		tb.Fatalf("pgtest: hold xid: %v", err)
	}
	err = conn.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint, pg_backend_pid(), current_database()").
		Scan(&h.XID, &h.PID, &h.Database)
	if err != nil {
		tb.Fatalf("pgtest: hold xid: %v", err)
	}
	return h
}

// Running reports, on the transaction's own connection, that it is still
// open with the same transaction id.
func (h *HeldXID) Running(ctx context.Context) (bool, error) {
	if h.conn == nil {
		return false, nil
	}
	var x uint64
	if err := h.conn.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&x); err != nil {
		return false, err
	}
	return x == h.XID, nil
}

// Release rolls the transaction back and closes its connection (idempotent).
func (h *HeldXID) Release() {
	if h.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = h.conn.Exec(ctx, "ROLLBACK")
	_ = h.conn.Close(ctx)
	h.conn = nil
}
