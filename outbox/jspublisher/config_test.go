package jspublisher_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// MaxInFlight above 1 needs a connection without a reconnect buffer: a
// publish buffered while the client reconnects would be sent after the
// messages lost with the broker, out of log order.
func TestNewRefusesPipeliningOnABufferingConnection(t *testing.T) {
	t.Parallel()
	nc, err := nats.Connect(natsURL) // the default: an 8 MB reconnect buffer
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = jspublisher.New(js, &jspublisher.Config{MaxInFlight: 8})
	var ia *pgdcb.InvalidArgumentError
	require.ErrorAs(t, err, &ia)
	require.Equal(t, "Config.MaxInFlight", ia.Name)
	require.Contains(t, ia.Reason, "nats.ReconnectBufSize(-1)")
	_, err = jspublisher.New(js, &jspublisher.Config{MaxInFlight: 1})
	require.NoError(t, err)
}
