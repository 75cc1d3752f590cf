package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// holdDB says where holdXact holds its transaction.
type holdDB int

const (
	// sameDatabase: in the workload's own database.
	sameDatabase holdDB = iota
	// otherDatabase: in a database of its own, which holdXact creates and
	// release drops (another application on the same cluster).
	otherDatabase
)

func (d holdDB) String() string {
	if d == otherDatabase {
		return "in another database"
	}
	return "in the same database"
}

// holdXact opens a transaction that holds an xid open in db (a batch job, a
// session idle in transaction): it holds the cluster's tailing horizon until
// release. The server ends it after holdTimeout should the workload fail
// before releasing it. release returns an error when the transaction had
// ended before it (it did not hold for the whole workload); it runs once,
// and later calls return what the first returned.
func holdXact(ctx context.Context, env *Env, db holdDB) (release func() error, err error) {
	cfg := env.Pool.Config().ConnConfig.Copy()
	drop := func() {}
	if db == otherDatabase {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		name := SchemaPrefix + "hold_" + hex.EncodeToString(b[:])
		ident := pgx.Identifier{name}.Sanitize()
		if _, err := env.Pool.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
			return nil, fmt.Errorf("creating the database that holds a transaction: %w", err)
		}
		drop = func() {
			_, _ = env.Pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
		}
		cfg.Database = name
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, err
	}
	_, err = conn.Exec(ctx, fmt.Sprintf("SET idle_in_transaction_session_timeout = %d", holdTimeout.Milliseconds()))
	if err == nil {
		_, err = conn.Exec(ctx, "BEGIN; SELECT pg_current_xact_id()")
	}
	if err != nil {
		_ = conn.Close(context.Background())
		drop()
		return nil, err
	}
	return sync.OnceValue(func() error {
		defer drop()
		defer conn.Close(context.Background())
		var xid *uint64
		if err := conn.QueryRow(context.Background(), `SELECT pg_current_xact_id_if_assigned()`).Scan(&xid); err != nil || xid == nil {
			return fmt.Errorf("SELF-CHECK FAILED: the transaction held %s ended before the workload did (%v)", db, err)
		}
		_, err := conn.Exec(context.Background(), "ROLLBACK")
		return err
	}), nil
}
