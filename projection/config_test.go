package projection_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

func TestNewRefusesNegativeConfig(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	h := insertRows(ident.Schema(s))
	for _, c := range []struct {
		name, field string
		cfg         projection.Config
	}{
		{"BatchSize", "BatchSize", projection.Config{BatchSize: -1}},
		{"PollInterval", "PollInterval", projection.Config{ReaderConfig: projection.ReaderConfig{PollInterval: -time.Second}}},
		{"ElectionInterval", "ElectionInterval", projection.Config{ReaderConfig: projection.ReaderConfig{ElectionInterval: -1}}},
		{"HeartbeatInterval", "HeartbeatInterval", projection.Config{ReaderConfig: projection.ReaderConfig{HeartbeatInterval: -1}}},
		{"RetryMin", "RetryMin", projection.Config{ReaderConfig: projection.ReaderConfig{RetryMin: -1}}},
		{"RetryMax", "RetryMax", projection.Config{ReaderConfig: projection.ReaderConfig{RetryMax: -1}}},
		{"MaxAttempts", "MaxAttempts", projection.Config{ReaderConfig: projection.ReaderConfig{MaxAttempts: -1}}},
		{"Identity not UTF-8", "Identity", projection.Config{ReaderConfig: projection.ReaderConfig{Identity: "host\xff"}}},
		{"Identity with NUL", "Identity", projection.Config{ReaderConfig: projection.ReaderConfig{Identity: "host\x00"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := projection.New(s, "p", query.All(), h, &c.cfg)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, c.field)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia)
			require.Equal(t, "Config."+c.field, ia.Name)
		})
	}
	_, err := projection.New(s, "p", query.All(), h, &projection.Config{ReaderConfig: projection.ReaderConfig{MaxAttempts: -1}})
	require.Contains(t, err.Error(), "RetryForever", "the error says how to never give up")
}

// MaxAttempts RetryForever: a handler that always fails keeps being retried,
// and the projection never becomes FAILED (what a negative MaxAttempts did).
func TestRetryForever(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	cfg := *fast
	cfg.MaxAttempts = projection.RetryForever
	r, err := projection.New(s, "rm", query.Tagged([]string{"P"}), func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error {
		return errors.New("always")
	}, &cfg)
	require.NoError(t, err)
	appendN(t, s, "P", 1, 1)
	stop := start(t, r)
	defer stop()
	require.Eventually(t, func() bool {
		st, err := r.Status(ctx)
		return err == nil && st.ErrorCount >= 3*10 // three times the default MaxAttempts, 10
	}, wait, 5*time.Millisecond)
	st, err := r.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, projection.Active, st.State)
}
