package logical

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
)

// TestDoneSetSortedAndNotShared: the consumed set is kept ascending without
// duplicates as transactions are added, and a checkpoint handed out (which
// shares the set, uncopied) does not change when the set changes after it.
func TestDoneSetSortedAndNotShared(t *testing.T) {
	r := &Reader{doneSnap: &cursor.Snapshot{Xmin: 10, Xmax: 10}}
	for _, x := range []uint64{30, 12, 20, 12, 25} {
		r.addDone(x)
	}
	cp := r.checkpoint()
	require.Equal(t, []uint64{12, 20, 25, 30}, cp.Done.XIDs)
	r.addDone(15)
	r.addDone(40)
	r.addDone(11)
	require.Equal(t, []uint64{12, 20, 25, 30}, cp.Done.XIDs, "a checkpoint handed out changed")
	cp2 := r.checkpoint()
	require.Equal(t, []uint64{11, 12, 15, 20, 25, 30, 40}, cp2.Done.XIDs)
	// A sample that shows every transaction below 21 passes.
	r.pending = &sample{snap: &cursor.Snapshot{Xmin: 21, Xmax: 21}}
	r.passSample()
	require.Equal(t, []uint64{11, 12, 15, 20, 25, 30, 40}, cp2.Done.XIDs, "a checkpoint handed out changed")
	require.Equal(t, []uint64{25, 30, 40}, r.checkpoint().Done.XIDs)
	require.Equal(t, []uint64{12, 20, 25, 30}, cp.Done.XIDs)
}
