package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/query"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []memstore.Config{{MaxBatchSize: -1}, {MaxEventBytes: -1}, {MaxBatchBytes: -2},
		{MaxEventBytes: storekit.MaxBytesLimit + 1}} {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			_, err := memstore.New(&cfg)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, "%+v", cfg)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia)
		})
	}

	// Limits apply as on the PostgreSQL store, with its error.
	s, err := memstore.New(&memstore.Config{MaxBatchSize: 2, MaxEventBytes: 100})
	require.NoError(t, err)
	ctx := context.Background()
	e := pgdcb.MustEvent("E", 1)
	_, err = s.Append(ctx, []pgdcb.Event{e, e, e})
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
	require.ErrorContains(t, err, "MaxBatchSize 2")
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("E", string(make([]byte, 100)))})
	require.ErrorContains(t, err, "MaxEventBytes 100")
	evs, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Empty(t, evs)

	// Now stamps the events.
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s = memstore.MustNew(&memstore.Config{Now: func() time.Time { return at }})
	_, err = s.Append(ctx, []pgdcb.Event{e})
	require.NoError(t, err)
	evs, _, err = s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Equal(t, at, evs[0].OccurredAt)
}

// A store's input is its own: changing the appended event's JSON afterwards
// does not change the log.
func TestAppendCopiesInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.MustNew(nil)
	e := pgdcb.MustEvent("E", map[string]int{"a": 1})
	_, err := s.Append(ctx, []pgdcb.Event{e})
	require.NoError(t, err)
	e.Data[2] = 'b'
	evs, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(evs[0].Data))
}
