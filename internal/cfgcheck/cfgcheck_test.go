package cfgcheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
)

func TestNonNegative(t *testing.T) {
	t.Parallel()
	require.NoError(t, NonNegative(Int("A", 0, 5), Duration("B", 0, time.Second), Int("C", 3, 1)))
	err := NonNegative(Int("A", 1, 5), Duration("B", -time.Second, 2*time.Second))
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	var ia *pgdcb.InvalidArgumentError
	require.ErrorAs(t, err, &ia)
	require.Equal(t, "Config.B", ia.Name)
	require.Equal(t, "must not be negative (got -1s; 0 means the default, 2s)", ia.Reason)
	err = NonNegative(Int("N", -5, 10).Note("set X for Y"))
	require.EqualError(t, err, "pgdcb: invalid argument Config.N: must not be negative (got -5; 0 means the default, 10; set X for Y)")
}
