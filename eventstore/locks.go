package eventstore

import (
	"slices"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
)

// Lock keys (docs/CONCURRENCY.md, "Mechanism"). Every appended event takes its type's key, each of
// its tags' keys and the global key in SHARED mode. A check (each item of the
// condition query and of the idempotency query) takes one key in EXCLUSIVE mode:
// a tag of the item when it has tags (every matching event carries that tag),
// else each of its types, else the global key. So a check waits for every
// in-flight append that could add a matching event, and such an append waits
// for the check's transaction; appends that share no key never wait for each
// other (with group commit too: a group tries its keys first and never waits
// for one, see group.go). Keys are 64-bit hashes of (schema, kind, value): a collision only makes
// two unrelated appends wait for each other, it never skips a wait.

type lockKind byte

const (
	kindGlobal lockKind = 'g'
	kindType   lockKind = 'y'
	kindTag    lockKind = 't'
	// kindSubject: a subject's data key (keys.go), never an append's key.
	kindSubject lockKind = 's'
)

// lockKey is FNV-1a (64 bits) of schema, 0, kind, 0, value, computed in
// place (hash/fnv's would allocate its state and the byte slices at every
// key; the keys must stay these values: every binary appending to a schema
// must compute the same, TestLockKeyIsFNV1a).
func lockKey(schema string, kind lockKind, value string) int64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(schema); i++ {
		h = (h ^ uint64(schema[i])) * fnvPrime64
	}
	h *= fnvPrime64 // byte 0 (x ^ 0 is x)
	h = (h ^ uint64(kind)) * fnvPrime64
	h *= fnvPrime64 // byte 0
	for i := 0; i < len(value); i++ {
		h = (h ^ uint64(value[i])) * fnvPrime64
	}
	return int64(h)
}

// FNV-1a's 64-bit parameters (hash/fnv).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

type lockSet struct {
	keys []int64
	excl []bool
}

// locksFor returns the keys an append must take, strictly ascending, each in its
// strongest mode; escalated to the global key alone (exclusive) when there would
// be more than maxKeys.
func locksFor(schema string, events []pgdcb.Event, cond *appendif.Condition, maxKeys int) lockSet {
	modes := make(map[int64]bool, 2+2*len(events))
	add := func(k int64, exclusive bool) { modes[k] = modes[k] || exclusive }
	global := lockKey(schema, kindGlobal, "")
	add(global, false)
	for _, e := range events {
		add(lockKey(schema, kindType, e.Type), false)
		for _, t := range e.Tags.Tags() {
			add(lockKey(schema, kindTag, t.String()), false)
		}
	}
	if cond != nil {
		for _, q := range []query.Query{cond.Idempotency, cond.FailIfEventsMatch} {
			for _, it := range q.Items() {
				switch {
				case it.Tags.Len() > 0:
					add(lockKey(schema, kindTag, it.Tags.Tags()[0].String()), true)
				case len(it.Types) > 0:
					for _, t := range it.Types {
						add(lockKey(schema, kindType, t), true)
					}
				default:
					add(global, true)
				}
			}
		}
	}
	if len(modes) > maxKeys {
		return lockSet{keys: []int64{global}, excl: []bool{true}}
	}
	return sortedLocks(modes)
}

// sortedLocks turns keys with their modes (true: exclusive) into a lockSet
// in ascending key order, the order every append takes them in.
func sortedLocks(modes map[int64]bool) lockSet {
	ls := lockSet{keys: make([]int64, 0, len(modes)), excl: make([]bool, 0, len(modes))}
	for k := range modes {
		ls.keys = append(ls.keys, k)
	}
	slices.Sort(ls.keys)
	for _, k := range ls.keys {
		ls.excl = append(ls.excl, modes[k])
	}
	return ls
}
