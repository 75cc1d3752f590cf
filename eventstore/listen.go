package eventstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen implements Interface: it LISTENs on NotifyChannel(schema) on a
// dedicated connection (not from the pool: a pooled connection would carry
// the LISTEN to its next user) and calls wake for every notification (see
// Notify), until ctx ends or the connection fails. It calls wake once as soon
// as the LISTEN is in place. Behind PgBouncer in transaction mode LISTEN
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
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return errf("listen", err)
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
