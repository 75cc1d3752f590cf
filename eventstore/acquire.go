package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/connpeek"
)

// Fewer failures to settle (docs/FAULTS.md, "Fewer failures to settle").
//
// After a server restart (or a pg_terminate_backend) the pool's idle
// connections are dead: each backend sent a FATAL message and closed its
// socket. pgxpool pings a connection idle for more than a second before it
// hands it out; one idle for less (a busy pool) is handed out unchecked, and
// an append sent on it meets the dead server and has to be settled. The
// store checks every connection it acquires for an append where that is
// cheap: one non-blocking peek at the socket (connpeek, no round trip). A
// socket with bytes waiting or closed is pinged; a connection that fails the
// ping is closed and another one is taken.
//
// A send that fails with an error that pgconn says happened before anything
// was sent (pgconn.SafeToRetry, and not a server error: the connection was
// closed before use, the context had ended, a write of zero bytes) is sent
// again on a fresh connection, without settling: one statement that is its
// own transaction cannot have committed then. (A COMMIT of the caller's
// transaction is another matter: CommitTx still calls every such failure
// unknown.) Every path that sends an append on a connection of its own does
// this in one place, sendFresh; a group's sender puts the members of such a
// send back in the queue instead (group.go), for another connection.

// pingTimeout bounds the ping of a connection whose socket looked dead.
const pingTimeout = 2 * time.Second

// acquire takes a pooled connection for an append, checked (usable). A dead
// one is closed and another taken, at most the pool's size plus one times
// (as pgxpool's own Acquire does); the last one is returned unchecked.
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	tries := s.maxConns + 1
	for range tries {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if s.usable(ctx, conn) {
			return conn, nil
		}
		s.settler.deadConns.Add(1)
		discard(ctx, conn)
	}
	return s.pool.Acquire(ctx)
}

// usable checks conn where it is cheap: a quiet socket is taken as is; one
// with bytes waiting, or closed, is pinged.
func (s *Store) usable(ctx context.Context, conn *pgxpool.Conn) bool {
	if conn.Conn().IsClosed() {
		return false
	}
	if connpeek.Peek(conn.Conn().PgConn().Conn()) != connpeek.Pending {
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	return conn.Ping(pctx) == nil
}

// notSent reports whether err, the failure of one statement sent on a
// pooled connection, says for certain that the statement never left the
// client (see the top of the file).
func notSent(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && pgconn.SafeToRetry(err)
}

// sendFresh is the one retry of a send that never left the client (see the
// top of the file), for every append sent on a connection of its own
// (sendSettled, sendAlone). It acquires a checked connection and runs send
// on it. send returns nil once its statement went out (it has the call's
// answer then, and may have discarded conn), else why nothing did: a
// failure notSent says so of, or errConnLost (conn was closed before the
// send). conn then goes back to the pool (which closes a closed one) and
// send runs again on another connection, while ctx is live, at most
// maxResends more times.
//
// It returns nil once a send went out, else the cause of the last try (the
// acquire's failure, or send's; with ctx's error when ctx ended), without
// the library's prefix: nothing was sent.
func (s *Store) sendFresh(ctx context.Context, send func(conn *pgxpool.Conn) error) error {
	for try := 0; ; try++ {
		conn, err := s.acquire(ctx)
		if err != nil {
			return fmt.Errorf("acquire a connection: %w", err)
		}
		err = send(conn)
		conn.Release()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || try == maxResends {
			return withCtxErr(ctx, err)
		}
		if notSent(err) {
			s.settler.notSent.Add(1)
		}
	}
}
