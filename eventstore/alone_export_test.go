package eventstore

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
)

// TryAppendAlone sends events (valid) on conn as the group committer sends
// an append alone (tryCallAlone), and returns its result or the busy keys
// (tests).
func TryAppendAlone(ctx context.Context, s *Store, conn *pgxpool.Conn, events []pgdcb.Event, cond *appendif.Condition) (pgdcb.AppendResult, []int64, error) {
	r := &groupReq{ctx: ctx, events: events, cond: cond, id: s.settler.callID(events),
		locks: locksFor(s.cfg.Schema, events, cond, s.cfg.MaxLockKeys)}
	out, busy, err := s.tryCallAlone(ctx, conn, r)
	if err != nil || busy != nil {
		var keys []int64
		for k := range busy {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return pgdcb.AppendResult{}, keys, err
	}
	return out[0].res, nil, out[0].err
}
