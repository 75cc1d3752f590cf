package eventstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen implements pgdcb.Store: it registers as a listener and LISTENs on
// NotifyChannel(schema) (ListenConn) on a dedicated connection (not from
// the pool: a pooled connection would carry the LISTEN to its next user) and
// calls wake for every notification (see Notify), until ctx ends or the
// connection fails. It calls wake once as soon as the LISTEN is in place and
// once more ListenerSettle later: appends that committed before the
// registration was visible, or while a store still trusted its last check,
// sent no notification. wake is never called concurrently, nor after Listen
// returned. Behind PgBouncer in transaction mode LISTEN
// cannot work: poll instead.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return errf("listen", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if err := listenConn(ctx, conn, s.cfg.Schema); err != nil {
		return err
	}
	var (
		mu      sync.Mutex
		stopped bool
	)
	once := func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			wake()
		}
	}
	settled := time.AfterFunc(listenerSettle, once) // the appends a store did not notify
	defer func() {
		settled.Stop()
		mu.Lock()
		stopped = true
		mu.Unlock()
	}()
	once() // notifications may have been lost while nobody listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errf("listen", err)
		}
		once()
	}
}
