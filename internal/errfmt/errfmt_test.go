package errfmt_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/errfmt"
)

var errSentinel = errors.New("pgdcb: schema not migrated")

func TestOnePrefix(t *testing.T) {
	t.Parallel()
	err := errfmt.Wrap("migrate runstore", errSentinel)
	require.EqualError(t, err, "pgdcb: migrate runstore: schema not migrated")
	require.ErrorIs(t, err, errSentinel)

	again := errfmt.Wrap("append", errfmt.Wrap("append", errSentinel))
	require.EqualError(t, again, "pgdcb: append: schema not migrated", "an op is not repeated")
	require.ErrorIs(t, again, errSentinel)

	f := errfmt.Errorf("pgdcb: runstore: catch up %q: %w", "x", errfmt.Wrap("read", errSentinel))
	require.EqualError(t, f, `pgdcb: runstore: catch up "x": read: schema not migrated`)
	require.ErrorIs(t, f, errSentinel)

	require.Nil(t, errfmt.Wrap("x", nil))
	require.Equal(t, "append needs READ COMMITTED", errfmt.Trim("pgdcb: append needs READ COMMITTED"))
}
