package logical_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// A logical reader hands out old events in the current shape, under the
// current name of a renamed type, through the store's read pipeline: those
// of the initial snapshot read and those streamed from the WAL, matched by
// a query naming the new name.
func TestLogicalUpcasts(t *testing.T) {
	plain, pool := newStore(t)
	ctx := t.Context()
	var reg upcast.Registry
	require.NoError(t, reg.Rename("SeatHeld", "SeatReserved"))
	require.NoError(t, reg.Register("SeatReserved", 1, func(d json.RawMessage) (json.RawMessage, error) {
		var v struct{ Seat int }
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"seatNo": v.Seat})
	}))
	store, err := eventstore.New(pool, &eventstore.Config{Schema: plain.Schema(), Upcasters: &reg})
	require.NoError(t, err)
	old := func(seat int) pgdcb.Event {
		return pgdcb.MustEvent("SeatHeld", map[string]int{"seat": seat}, "show=1")
	}
	_, err = plain.Append(ctx, []pgdcb.Event{old(1)}) // written before the change
	require.NoError(t, err)

	useSlot(store, "u")
	rd, err := logical.Open(ctx, store, "u", query.Tagged([]string{"SeatReserved"}, "show=1"), logical.Checkpoint{}, cursor.Start, nil)
	require.NoError(t, err)
	defer rd.Close(ctx)
	check := func(b logical.Batch, seat int) {
		t.Helper()
		require.Len(t, b.Events, 1)
		require.Equal(t, "SeatReserved", b.Events[0].Type)
		require.JSONEq(t, `{"seatNo": `+string(rune('0'+seat))+`}`, string(b.Events[0].Data))
	}
	b, err := rd.Next(ctx, 10, 10*time.Millisecond)
	require.NoError(t, err)
	check(b, 1) // the initial read
	b, err = rd.Next(ctx, 10, 10*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, b.Events)

	_, err = plain.Append(ctx, []pgdcb.Event{old(2)})
	require.NoError(t, err)
	check(nextEvents(t, rd, 10), 2) // streamed
}
