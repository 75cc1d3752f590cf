package eventstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen implements Interface: it registers as a listener and LISTENs on
// NotifyChannel(schema) (ListenConn) on a dedicated connection (not from
// the pool: a pooled connection would carry the LISTEN to its next user) and
// calls wake for every notification (see Notify), until ctx ends or the
// connection fails. It calls wake once as soon as the LISTEN is in place:
// appends that committed before the registration was visible sent no
// notification. Behind PgBouncer in transaction mode LISTEN
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
	if err := ListenConn(ctx, conn, s.cfg.Schema); err != nil {
		return err
	}
	wake() // notifications may have been lost while nobody listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errf("listen", err)
		}
		wake()
	}
}
