package conformance

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Event data and metadata read back in jsonb's form on every store: keys
// sorted (shorter first), the last of duplicate keys, numbers in numeric's
// form (1e2 → 100), jsonb's spacing. So {"x":1e2} decodes into an int
// everywhere.
func testJSONForm(t testing.TB, s pgdcb.Store, _ Options) {
	ctx := context.Background()
	ev := pgdcb.Event{Type: "J", Tags: tags.MustParseSet("json=1"),
		Data:     json.RawMessage(` {"x" : 1e2, "bb":[1.50, -0, "\u00e9\/"], "a":{"k":1,"k":2}} `),
		Metadata: json.RawMessage(`{"z":1E-2,"y":true}`)}
	appendOK(t, s, ev)
	evs := readAll(t, s, query.Tagged(nil, "json=1"))
	require.Len(t, evs, 1)
	require.Equal(t, `{"a": {"k": 2}, "x": 100, "bb": [1.50, 0, "é/"]}`, string(evs[0].Data))
	require.Equal(t, `{"y": true, "z": 0.01}`, string(evs[0].Metadata))
	var d struct{ X int }
	require.NoError(t, json.Unmarshal(evs[0].Data, &d), "1e2 decodes into an int")
	require.Equal(t, 100, d.X)
	// Tailing reads and the last-event read give the same bytes.
	last, _, err := s.ReadLast(ctx, query.Tagged(nil, "json=1"))
	require.NoError(t, err)
	require.Equal(t, evs[0].Data, last.Data)
}
