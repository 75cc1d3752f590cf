package eventstore

import (
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// WaitSnapshotWrites waits for the store's background snapshot writes.
func WaitSnapshotWrites(s *Store) { s.snap.waitSnapshotWrites() }

// SnapshotReadSQL exposes the snapshot read's statement.
func SnapshotReadSQL(s *Store, q query.Query, after cursor.Cursor) (string, []any) {
	sql, a := s.snapshotReadSQL(q, after, s.proved(nil))
	return sql, a
}
