package subscription_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// While a subscription catches up, each batch reports how far behind it is;
// only the last batch reports 0. Before the fix, the tail's Head was the
// page's own last event, so every batch reported 0 while behind.
func TestLagIsReportedWhileBehind(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, "")
	appendN(t, s, "E", 0, 100)
	sub, err := subscription.New(s, query.All(), &subscription.Config{BatchSize: 10, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var lags []int64
	seen := 0
	errDone := errors.New("done")
	err = sub.Run(ctx, cursor.Start, func(_ context.Context, b subscription.Batch) error {
		lags = append(lags, b.Lag.Events)
		seen += len(b.Events)
		if seen >= 100 {
			return errDone
		}
		return nil
	})
	require.ErrorIs(t, err, errDone)
	require.Len(t, lags, 10)
	require.EqualValues(t, 90, lags[0], "the first batch is 90 events behind the head")
	for i := 1; i < 9; i++ {
		require.Less(t, lags[i], lags[i-1], "lag falls as the reader catches up: %v", lags)
	}
	require.Zero(t, lags[9], "caught up")
}
