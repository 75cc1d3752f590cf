package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// read and export give events as stored (the CLI has no upcasters: it is
// not the application's code), each with the version it was written with
// in its metadata; an import keeps it, so the application reads the
// imported log in the current shape: a backup is as stored.
func TestExportAsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, srcSchema := db(t)
	dst, dstSchema := db(t)
	require.Equal(t, 0, src("", "migrate").code)
	require.Equal(t, 0, dst("", "migrate").code)
	var reg upcast.Registry
	require.NoError(t, reg.Register("Priced", 1, func(d json.RawMessage) (json.RawMessage, error) {
		var v struct{ Euros int }
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"cents": v.Euros * 100})
	}))
	pool := pgtest.Pool(t)
	open := func(schema string) *eventstore.Store {
		s, err := eventstore.New(pool, &eventstore.Config{Schema: schema, Upcasters: &reg})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}
	// Written before the change (by a store without upcasters: the CLI),
	// then after it by the application.
	require.Equal(t, 0, src("", "append", "-type", "Priced", "-data", `{"euros": 3}`).code)
	_, err := open(srcSchema).Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Priced", map[string]int{"cents": 250})})
	require.NoError(t, err)

	for _, cmd := range []string{"read", "export"} {
		r := src("", cmd)
		require.Equal(t, 0, r.code, r.stderr)
		l := lines(r.stdout)
		require.Len(t, l, 2)
		require.Equal(t, map[string]any{"euros": 3.0}, decode(t, l[0])["data"], cmd)
		require.Nil(t, decode(t, l[0])["metadata"], cmd)
		require.Equal(t, map[string]any{"cents": 250.0}, decode(t, l[1])["data"], cmd)
		require.Equal(t, map[string]any{upcast.MetadataKey: 2.0}, decode(t, l[1])["metadata"], cmd)
	}
	r := dst(src("", "export").stdout, "import")
	require.Equal(t, 0, r.code, r.stderr)
	evs, _, err := open(dstSchema).ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	for i, want := range []string{`{"cents": 300}`, `{"cents": 250}`} {
		require.JSONEq(t, want, string(evs[i].Data), "imported event %d, read by the application", i)
	}
}
