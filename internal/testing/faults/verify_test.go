package faults_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
)

// The checker of the ledger catches every kind of violation it counts (a
// fault test whose checks cannot fail proves nothing).
func TestVerifyCatchesViolations(t *testing.T) {
	cluster(t)
	e := newEnv(t)
	store := e.store(t, e.admin, nil)
	appendAs := func(id string, n int) {
		_, err := store.Append(t.Context(), batch("V", id, n))
		require.NoError(t, err)
	}
	led := &ledger{}
	unknownErr := &pgdcb.OutcomeUnknownError{Op: "append", Err: errors.New("unexpected EOF")}

	appendAs("fine", 3)
	led.add(attempt{id: "fine", n: 3})
	led.add(attempt{id: "lost", n: 1}) // acknowledged, never written
	appendAs("dup", 2)
	appendAs("dup", 2)
	led.add(attempt{id: "dup", n: 2})
	appendAs("partial", 2)
	led.add(attempt{id: "partial", n: 5, err: unknownErr})
	appendAs("definite", 1)
	led.add(attempt{id: "definite", n: 1, err: errors.New("connection reset by peer")})
	appendAs("unknown", 1)
	led.add(attempt{id: "unknown", n: 1, err: unknownErr})
	led.add(attempt{id: "unknown-absent", n: 1, err: unknownErr})
	led.add(attempt{id: "refused", n: 1, err: errors.New("connection refused")})
	appendAs("phantom", 1)
	appendAs("misreported", 2)
	led.add(attempt{id: "misreported", n: 2, pos: []int64{1, 2}}) // not where it is

	v := verify(t, e, led)
	require.Equal(t, 9, v.f.Attempts)
	require.Equal(t, 4, v.f.Acked)
	require.Equal(t, 2, v.f.Definite)
	require.Equal(t, 3, v.f.Unknown)
	require.Equal(t, 2, v.f.UnknownCommitted, "the unknown outcome present whole, and the partial one")
	require.Equal(t, 1, v.f.Lost)
	require.Equal(t, 1, v.f.Duplicated)
	require.Equal(t, 1, v.f.Partial)
	require.Equal(t, 1, v.f.DefiniteCommitted)
	require.Equal(t, 1, v.f.Misreported)
	require.Equal(t, 1, v.phantom)

	// The counter check.
	require.NoError(t, checkCounter([]int{1, 2, 3}))
	require.Error(t, checkCounter([]int{1, 2, 2}), "a repeat (two decisions on the same state)")
	require.Error(t, checkCounter([]int{1, 3}), "a gap")
	require.Error(t, checkCounter([]int{2}), "a gap at the start")
}
