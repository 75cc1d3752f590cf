package jspublisher_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
)

func TestNewRefusesNegativeConfig(t *testing.T) {
	t.Parallel()
	js, _, _ := testStream(t)
	for _, c := range []struct {
		field string
		cfg   jspublisher.Config
	}{
		{"MaxInFlight", jspublisher.Config{MaxInFlight: -1}},
		{"AckTimeout", jspublisher.Config{AckTimeout: -time.Second}},
	} {
		t.Run(c.field, func(t *testing.T) {
			_, err := jspublisher.New(js, &c.cfg)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, c.field)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia)
			require.Equal(t, "Config."+c.field, ia.Name)
		})
	}
	_, err := jspublisher.New(js, nil)
	require.NoError(t, err)
}
