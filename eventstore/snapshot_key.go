package eventstore

import (
	"crypto/sha256"

	"github.com/pgdcb/pgdcb/query"
)

// snapshotKey is the text and the key (query_key) of the decision
// snapshots of a model reading q: canonicalQuery's, and with upcasters
// (Config.Upcasters) their set's version (upcast.Registry.Version) in the
// key too, so a snapshot folded under one set of shapes is never loaded
// under another: a fold never mixes shapes. Without upcasters the key is
// the query's alone, as before upcasters existed.
func (s *Store) snapshotKey(q query.Query) (string, []byte) {
	text, key := canonicalQuery(q)
	if s.upcasters == "" {
		return text, key
	}
	sum := sha256.Sum256([]byte(text + "\x00upcasters " + s.upcasters))
	return text, sum[:]
}
