package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The relay's tests that publish to NATS JetStream live with the publisher,
// in the module outbox/jspublisher.

// newStore returns a store in a fresh schema, dropped when the test ends.
func newStore(t testing.TB) *eventstore.Store {
	t.Helper()
	s, _ := teststore.New(t, nil)
	return s
}

func TestNewRefusesNegativeConfig(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	pub := outbox.PublisherFunc(func(context.Context, []outbox.Message) error { return nil })
	topic := outbox.Topic{Name: "t", Query: query.All()}
	for _, c := range []struct {
		field string
		cfg   outbox.Config
	}{
		{"BatchSize", outbox.Config{BatchSize: -1}},
		{"PublishTimeout", outbox.Config{PublishTimeout: -time.Second}},
		{"PollInterval", outbox.Config{ReaderConfig: projection.ReaderConfig{PollInterval: -1}}},
		{"ElectionInterval", outbox.Config{ReaderConfig: projection.ReaderConfig{ElectionInterval: -1}}},
		{"HeartbeatInterval", outbox.Config{ReaderConfig: projection.ReaderConfig{HeartbeatInterval: -1}}},
		{"RetryMin", outbox.Config{ReaderConfig: projection.ReaderConfig{RetryMin: -1}}},
		{"RetryMax", outbox.Config{ReaderConfig: projection.ReaderConfig{RetryMax: -1}}},
		{"MaxAttempts", outbox.Config{ReaderConfig: projection.ReaderConfig{MaxAttempts: -1}}},
		{"StallAfter", outbox.Config{StallAfter: -time.Second}},
	} {
		t.Run(c.field, func(t *testing.T) {
			_, err := outbox.New(s, topic, "p", pub, &c.cfg)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, c.field)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia)
			require.Equal(t, "Config."+c.field, ia.Name)
		})
	}
	_, err := outbox.New(s, topic, "p", pub, &outbox.Config{ReaderConfig: projection.ReaderConfig{MaxAttempts: projection.RetryForever}})
	require.NoError(t, err)
}
