package eventstore

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
)

// ListenerSettle is how long after registering (ListenConn) a listener
// still reads without being notified: a store that found no listener
// registered skips the check (and its round trip) for ListenerCheckInterval
// after it began it, so an append that commits in that window after a
// registration may send no NOTIFY. A listener reads once after ListenConn
// returns and once more ListenerSettle later (Store.Listen calls its wake
// function both times); ListenerSettle is ListenerCheckInterval plus a
// tenth, for clocks of different processes.
const listenerSettle = listenerCheckInterval + listenerCheckInterval/10

// ListenerCheckInterval is how long a store that found no listener
// registered sends no notification (and no statement) after appends; see
// ListenerSettle.
const listenerCheckInterval = 100 * time.Millisecond

// ListenerLockKey is the session advisory lock (two-int4 form, a key space
// apart from the store's own bigint keys) that marks a connection listening
// on NotifyChannel(schema). A listener holds it in SHARED mode for as long as
// it listens; after an append commits, the store sends its NOTIFY only when
// some session holds it (see Notify), so that an append nobody listens for
// costs one transaction, not two.
//
// ListenConn and Store.Listen take it. A reader that LISTENs on the channel
// by other means (psql, another language) must take it too, on the same
// connection and before its LISTEN:
//
//	SELECT pg_advisory_lock_shared(k1, k2); LISTEN "pgdcb_events_<schema>";
//
// or it is notified only while some other listener is registered. Either
// way it reads the log after its LISTEN and again ListenerSettle later.
func listenerLockKey(schema string) (int32, int32) {
	h := fnv.New64a()
	h.Write([]byte("pgdcb.listen\x00" + schema))
	v := h.Sum64()
	return int32(v >> 32), int32(v)
}

// ListenConn registers conn as a listener of schema's appends
// (ListenerLockKey, in shared mode) and then LISTENs on NotifyChannel(schema).
// In that order: an append that committed before the registration was seen
// is not notified, so the caller reads the log once after ListenConn
// returns, and once more ListenerSettle later (Store.Listen calls its wake
// function for both). A pooled
// connection must be given back with UnlistenConn first.
func listenConn(ctx context.Context, conn *pgx.Conn, schema string) error {
	k1, k2 := listenerLockKey(schema)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock_shared($1, $2)", k1, k2); err != nil {
		return errf("listen", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{notifyChannel(schema)}.Sanitize()); err != nil {
		return errf("listen", err)
	}
	return nil
}

// UnlistenConn undoes ListenConn: UNLISTEN on the channel, then the
// registration is released (closing the connection does both).
func unlistenConn(ctx context.Context, conn *pgx.Conn, schema string) error {
	k1, k2 := listenerLockKey(schema)
	if _, err := conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{notifyChannel(schema)}.Sanitize()); err != nil {
		return errf("unlisten", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock_shared($1, $2)", k1, k2); err != nil {
		return errf("unlisten", err)
	}
	return nil
}
