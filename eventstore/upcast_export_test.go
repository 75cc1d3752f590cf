package eventstore

import (
	"context"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// StoreSnapshot stores a decision snapshot of the model (name, version)
// reading q, at point, through the store's own write (its key included),
// without waiting for the horizon as SaveSnapshot does.
func StoreSnapshot(ctx context.Context, s *Store, name string, version int, q query.Query, point cursor.Cursor, state []byte) (bool, error) {
	text, key := s.snapshotKey(s.expand(q))
	var epoch int64
	if err := s.pool.QueryRow(ctx, `SELECT epoch FROM `+s.schema+`.decision_snapshot_epoch`).Scan(&epoch); err != nil {
		return false, err
	}
	return s.snap.writeSnapshot(ctx, &snapshotWrite{name: name, version: version, qtext: text, qkey: key,
		tx: point.TransactionID, position: point.Position, state: state, epoch: epoch})
}
