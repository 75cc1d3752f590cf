package subscription_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

func TestNewRefusesNegativeConfig(t *testing.T) {
	t.Parallel()
	s, err := eventstore.New(pgtestPool(t), nil)
	require.NoError(t, err)
	for _, c := range []struct {
		field string
		cfg   subscription.Config
	}{
		{"BatchSize", subscription.Config{BatchSize: -5}},
		{"PollInterval", subscription.Config{PollInterval: -time.Second}},
		{"RetryMin", subscription.Config{RetryMin: -1}},
		{"RetryMax", subscription.Config{RetryMax: -time.Millisecond}},
	} {
		t.Run(c.field, func(t *testing.T) {
			_, err := subscription.New(s, query.All(), &c.cfg)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, c.field)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia)
			require.Equal(t, "Config."+c.field, ia.Name)
			require.Contains(t, ia.Reason, "0 means the default")
		})
	}
	_, err = subscription.New(s, query.All(), &subscription.Config{})
	require.NoError(t, err, "0 means the default")
}
