package subscription_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
	"github.com/pgdcb/pgdcb/upcast"
)

// A subscription delivers events written under an old type name and shape
// in the current ones, to a query naming the new name.
func TestSubscriptionUpcasts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var reg upcast.Registry
	require.NoError(t, reg.Rename("ItemAdded", "Item"))
	require.NoError(t, reg.Register("Item", 1, func(d json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(map[string]json.RawMessage{"value": d})
	}))
	s := memstore.MustNew(&memstore.Config{Upcasters: &reg})
	old := pgdcb.MustEvent("ItemAdded", 1, "list=a")
	old.Metadata = json.RawMessage(`{"pgdcb_version": 1}`)
	_, err := s.Append(ctx, []pgdcb.Event{old, pgdcb.MustEvent("Item", map[string]int{"value": 2}, "list=a")})
	require.NoError(t, err)

	sub, err := subscription.New(s, query.Tagged([]string{"Item"}, "list=a"), &subscription.Config{PollInterval: time.Hour})
	require.NoError(t, err)
	var c collector
	stop := run(t, sub, cursor.Start, c.handle)
	require.Eventually(t, func() bool { return c.len() == 2 }, wait, time.Millisecond)
	require.ErrorIs(t, stop(), context.Canceled)
	for i, ev := range c.events() {
		require.Equal(t, "Item", ev.Type)
		require.JSONEq(t, `{"value": `+string(rune('1'+i))+`}`, string(ev.Data))
	}
}
