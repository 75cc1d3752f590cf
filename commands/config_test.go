package commands

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
)

// Config.validate refuses negative values; New calls it first.
func TestConfigRefusesNegatives(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		field string
		cfg   Config
	}{
		{"MaxAttempts", Config{MaxAttempts: -1}},
		{"RetryMin", Config{RetryMin: -time.Millisecond}},
		{"RetryMax", Config{RetryMax: -1}},
	} {
		t.Run(c.field, func(t *testing.T) {
			err := c.cfg.validate()
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, c.field)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia)
			require.Equal(t, "Config."+c.field, ia.Name)
			require.Contains(t, ia.Reason, "0 means the default")
		})
	}
	var nilCfg *Config
	require.NoError(t, nilCfg.validate())
	require.NoError(t, (&Config{}).validate())
}
