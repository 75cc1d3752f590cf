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

// TestDetachedInitialReadNamesWhatItRead: a checkpoint stored during the
// initial snapshot read, detached, names as consumed exactly the events the
// read had delivered (visible in its snapshot, up to After), checked
// against that definition for every event of a small range; it survives
// its text form, and Open takes it as detached.
func TestDetachedInitialReadNamesWhatItRead(t *testing.T) {
	snaps := []*cursor.Snapshot{
		{Xmin: 10, Xmax: 20, Xip: []uint64{10, 13, 17}},
		{Xmin: 5, Xmax: 6},
		{Xmin: 12, Xmax: 30, Xip: []uint64{12, 25}},
	}
	for _, s := range snaps {
		for a := uint64(0); a <= 32; a++ {
			after := cursor.Cursor{TransactionID: a, Position: 3}
			if a == 0 {
				after.Position = 0
			}
			cp := Checkpoint{LSN: 100, Sync: &Sync{Snapshot: s, After: after}}
			d, err := cp.Detached()
			require.NoError(t, err)
			require.True(t, d.IsDetached())
			parsed, err := ParseCheckpoint(d.String())
			require.NoError(t, err, d.String())
			require.True(t, parsed.IsDetached())
			for x := uint64(1); x <= 33; x++ {
				for pos := int64(1); pos <= 5; pos++ {
					want := s.Visible(x) && cursor.Compare(x, pos, after.TransactionID, after.Position) <= 0
					require.Equal(t, want, parsed.Consumed(x, pos), "snapshot %s after %s: event (%d, %d)", s, after, x, pos)
					require.Equal(t, want, cp.Consumed(x, pos))
				}
			}
		}
	}
}

// TestDetachedRefusesWithoutConsumedSet: a checkpoint that does not name
// what it consumed cannot be detached.
func TestDetachedRefusesWithoutConsumedSet(t *testing.T) {
	var se *SwitchError
	_, err := Checkpoint{LSN: 100, Skip: 2}.Detached()
	require.ErrorAs(t, err, &se)
	done := &Done{Snapshot: &cursor.Snapshot{Xmin: 5, Xmax: 5}}
	_, err = Checkpoint{LSN: 100, Sync: &Sync{Snapshot: done.Snapshot}, Done: done}.Detached()
	require.ErrorAs(t, err, &se)
	d, err := Checkpoint{LSN: 100, Done: done}.Detached()
	require.NoError(t, err)
	require.Equal(t, "0/0|0|5:5:;;", d.String())
	z, err := Checkpoint{}.Detached()
	require.NoError(t, err)
	require.True(t, z.isZero())
}
