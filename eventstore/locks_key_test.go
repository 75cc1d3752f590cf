package eventstore

import (
	"hash/fnv"
	"testing"
)

// The lock keys are FNV-1a of (schema, 0, kind, 0, value), computed in
// place: every binary that appends to a schema must take the same keys
// (an older one computed them with hash/fnv), or two appends that must
// exclude each other would not.
func TestLockKeyIsFNV1a(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		schema string
		kind   lockKind
		value  string
	}{
		{"pgdcb", kindGlobal, ""},
		{"pgdcb", kindTag, "account=a1"},
		{"app_7", kindType, "Deposited"},
		{"", kindTag, "k=ünïcode\x00x"},
	} {
		h := fnv.New64a()
		h.Write([]byte(c.schema))
		h.Write([]byte{0, byte(c.kind), 0})
		h.Write([]byte(c.value))
		if got, want := lockKey(c.schema, c.kind, c.value), int64(h.Sum64()); got != want {
			t.Errorf("lockKey(%q, %c, %q) = %d, hash/fnv %d", c.schema, c.kind, c.value, got, want)
		}
	}
}
