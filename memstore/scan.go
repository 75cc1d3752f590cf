package memstore

import (
	"slices"
	"sort"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// scan calls f, in log order (backwards when back), with every event that
// matches q and that after has not seen (nil after: every event), until f
// returns false. It visits only the events of the rarest tag of each item
// when every item has tags, and only the events after the cursor's point when
// its snapshot has no in-progress transactions. Called with s.mu held.
func (s *Store) scan(q query.Query, after *cursor.Cursor, back bool, f func(pgdcb.StoredEvent) bool) {
	from := 0
	if after != nil && (after.Snapshot == nil || len(after.Snapshot.Xip) == 0) {
		from = sort.Search(len(s.events), func(i int) bool {
			e := s.events[i]
			return cursor.Compare(e.TransactionID, e.Position, after.TransactionID, after.Position) > 0
		})
	}
	visit := func(i int) bool {
		e := s.events[i]
		if !q.Matches(e.Type, e.Tags) || (after != nil && !notSeen(*after, e)) {
			return true
		}
		return f(e)
	}
	idx, ok := s.candidates(q)
	if !ok {
		if back {
			for i := len(s.events) - 1; i >= from && visit(i); i-- {
			}
		} else {
			for i := from; i < len(s.events) && visit(i); i++ {
			}
		}
		return
	}
	lo, _ := slices.BinarySearch(idx, from)
	if back {
		for k := len(idx) - 1; k >= lo && visit(idx[k]); k-- {
		}
	} else {
		for k := lo; k < len(idx) && visit(idx[k]); k++ {
		}
	}
}

// candidates returns, ascending, the indices of the events that may match q
// when every item of q has tags: for each item those of its rarest tag. ok is
// false when q needs a full scan.
func (s *Store) candidates(q query.Query) (idx []int, ok bool) {
	var lists [][]int
	for _, it := range q.Items() {
		if it.Tags.Len() == 0 {
			return nil, false
		}
		var best []int
		for k, tg := range it.Tags.Strings() {
			if l := s.byTag[tg]; k == 0 || len(l) < len(best) {
				best = l
			}
		}
		lists = append(lists, best)
	}
	if len(lists) == 1 {
		return lists[0], true
	}
	for _, l := range lists {
		idx = append(idx, l...)
	}
	slices.Sort(idx)
	return slices.Compact(idx), true
}
