package eventstore

import "github.com/pgdcb/pgdcb/query"

// ReadSQL exposes the read statement to tests that EXPLAIN it.
func ReadSQL(s *Store, q query.Query, opts ReadOptions) (string, []any) {
	sql, a := s.readSQL(q, opts, false)
	return sql, a
}
