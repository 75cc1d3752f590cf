package eventstore

import (
	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

// ReadSQL exposes the read statement to tests that EXPLAIN it.
func ReadSQL(s *Store, q query.Query, opts pgdcb.ReadOptions) (string, []any) {
	sql, a := s.readSQL(q, opts, false, s.proved(nil))
	return sql, a
}

// NoListenerCached reports whether the store's last listener check found no
// listener (so that Notify sends nothing for ListenerCheckInterval).
func NoListenerCached(s *Store) bool { return s.noListenerAt.Load() != 0 }

// SettleLookupSQL exposes the settle lookup to the test that EXPLAINs it.
func SettleLookupSQL(s *Store) string { return s.settler.settleLookupSQL() }

// The standby proof's bounds (standby.go).
const (
	ProvenMaxSteps = provenMaxSteps
	ProvenMaxGaps  = provenMaxGaps
)

// ProofPast is the standby xmin of the store's last decision read whose
// proof was past its bounds (0: none).
func ProofPast(s *Store) uint64 { return s.proofPast.Load() }

var CommitTx = commitTx

var DefaultMaxLockKeys = defaultMaxLockKeys

var ListenConn = listenConn

var UnlistenConn = unlistenConn

var ListenerCheckInterval = listenerCheckInterval

var ListenerSettle = listenerSettle

var NotifyChannel = notifyChannel
