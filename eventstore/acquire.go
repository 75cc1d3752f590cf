package eventstore

import (
	"context"
	"errors"
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
// once more on a fresh connection, without settling: one statement that is
// its own transaction cannot have committed then. (A COMMIT of the caller's
// transaction is another matter: CommitTx still calls every such failure
// unknown.)

// pingTimeout bounds the ping of a connection whose socket looked dead.
const pingTimeout = 2 * time.Second

// acquire takes a pooled connection for an append, checked (usable). A dead
// one is closed and another taken, at most the pool's size plus one times
// (as pgxpool's own Acquire does); the last one is returned unchecked.
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	tries := int(s.pool.Config().MaxConns) + 1
	for range tries {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if s.usable(ctx, conn) {
			return conn, nil
		}
		s.settleCount.deadConns.Add(1)
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
