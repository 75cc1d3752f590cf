package appendif_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
)

// A new user's first try: the append's outcome errors are reachable from
// package appendif, and they are package pgdcb's sentinels.
func TestSentinelsAreReexported(t *testing.T) {
	t.Parallel()
	failed := fmt.Errorf("wrapped: %w", &appendif.ConditionFailedError{Query: query.All()})
	require.ErrorIs(t, failed, pgdcb.ErrConditionFailed)
	require.ErrorIs(t, failed, pgdcb.ErrConditionFailed)
	require.ErrorIs(t, &appendif.IdempotentError{EventID: "x"}, pgdcb.ErrIdempotent)
	require.True(t, errors.Is(pgdcb.ErrTransactionState, pgdcb.ErrTransactionState))
	require.True(t, errors.Is(pgdcb.ErrOutcomeUnknown, pgdcb.ErrOutcomeUnknown))
}

// Telling a lost race from a repeated request.
func ExampleConditionFailedError() {
	var err error = &appendif.ConditionFailedError{Query: query.All(), ConflictPosition: 7}
	switch {
	case errors.Is(err, pgdcb.ErrIdempotent):
		fmt.Println("already applied")
	case errors.Is(err, pgdcb.ErrConditionFailed):
		fmt.Println("decide again")
	}
	// Output: decide again
}
