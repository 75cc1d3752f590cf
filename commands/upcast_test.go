package commands_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// A handler decides on events in the current shape: its Project and
// ReadAll see an event written under the old name and shape as today's,
// and its condition on the new name covers the old one.
func TestDecideSeesUpcastEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var reg upcast.Registry
	require.NoError(t, reg.Rename("Added", "Incremented"))
	require.NoError(t, reg.Register("Incremented", 1, func(d json.RawMessage) (json.RawMessage, error) {
		var v struct{ By int }
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"n": v.By})
	}))
	s := memstore.MustNew(&memstore.Config{Upcasters: &reg})
	old := pgdcb.MustEvent("Added", map[string]int{"by": 5}, "counter=a")
	old.Metadata = json.RawMessage(`{"pgdcb_version": 1}`)
	_, err := s.Append(ctx, []pgdcb.Event{old})
	require.NoError(t, err)
	ex, err := commands.New(s, nil)
	require.NoError(t, err)

	q := query.Tagged([]string{"Incremented"}, "counter=a")
	var seen []string
	out, err := ex.Execute(ctx, cmd("Next", commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		m := pgdcb.NewModel(q, 0, func(n int, ev pgdcb.StoredEvent) int {
			var v struct{ N int }
			_ = json.Unmarshal(ev.Data, &v)
			seen = append(seen, ev.Type)
			return v.N
		})
		cond, err := dc.Project(ctx, m)
		if err != nil {
			return nil, cond, err
		}
		evs, _, err := dc.ReadAll(ctx, q, nil)
		if err != nil || len(evs) != 1 || evs[0].Type != "Incremented" {
			return nil, cond, err
		}
		return []pgdcb.Event{pgdcb.MustEvent("Incremented", map[string]int{"n": m.State + 1}, "counter=a")}, cond, nil
	})))
	require.NoError(t, err)
	require.Len(t, out.Events, 1)
	require.Equal(t, []string{"Incremented"}, seen)
	require.JSONEq(t, `{"n": 6}`, string(out.Events[0].Data), "decided on the upcast state")
}
