package eventstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// scale is an upcaster multiplying {"n"} by f.
func scale(f int) upcast.Func {
	return func(d json.RawMessage) (json.RawMessage, error) {
		var v struct{ N int }
		if err := json.Unmarshal(d, &v); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"n": v.N * f})
	}
}

func scaled(t testing.TB, factors ...int) *upcast.Registry {
	var r upcast.Registry
	for i, f := range factors {
		require.NoError(t, r.Register("Counted", i+1, scale(f)))
	}
	return &r
}

func sumModel(q query.Query) *pgdcb.Model[int] {
	return pgdcb.NewModel(q, 0, func(s int, ev pgdcb.StoredEvent) int {
		var v struct{ N int }
		_ = json.Unmarshal(ev.Data, &v)
		return s + v.N
	}).WithSnapshots("sum", 1)
}

// A decision snapshot folded under one set of upcasters is never loaded
// under another: the store with one more upcaster folds from the start, in
// its own shape, while the store of the first set loads it. (The snapshots
// are stored at the last event directly: SaveSnapshot would wait for every
// transaction of the shared test database to end.)
func TestUpcastSnapshotKeyedBySet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, pool := newStore(t, &eventstore.Config{Upcasters: scaled(t, 10), SnapshotsManual: true})
	q := query.Tagged([]string{"Counted"}, "c=1")
	var last pgdcb.AppendResult
	for range 3 {
		e := pgdcb.MustEvent("Counted", map[string]int{"n": 1}, "c=1")
		e.Metadata = json.RawMessage(`{"pgdcb_version": 1}`)
		var err error
		last, err = a.Append(ctx, []pgdcb.Event{e})
		require.NoError(t, err)
	}
	ok, err := eventstore.StoreSnapshot(ctx, a, "sum", 1, q, last.Cursor(), []byte("30"))
	require.NoError(t, err)
	require.True(t, ok)
	ma := sumModel(q)
	_, err = a.Project(ctx, ma)
	require.NoError(t, err)
	require.Equal(t, 30, ma.State)
	require.EqualValues(t, 1, a.SnapshotStats().Loaded, "the set that wrote it uses it")

	b, err := eventstore.New(pool, &eventstore.Config{Schema: a.Schema(), Upcasters: scaled(t, 10, 2), SnapshotsManual: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	mb := sumModel(q)
	_, err = b.Project(ctx, mb)
	require.NoError(t, err)
	require.Equal(t, 60, mb.State, "folded from the start in the new shape, not from the old set's snapshot")
	require.Zero(t, b.SnapshotStats().Loaded)

	ok, err = eventstore.StoreSnapshot(ctx, b, "sum", 1, q, last.Cursor(), []byte("60"))
	require.NoError(t, err)
	require.True(t, ok, "a snapshot of its own, beside the other set's")
	var keys int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT query_key) FROM `+ident.Schema(a)+`.decision_snapshots`).Scan(&keys))
	require.Equal(t, 2, keys, "one snapshot per set")
	mb = sumModel(q)
	_, err = b.Project(ctx, mb)
	require.NoError(t, err)
	require.Equal(t, 60, mb.State)
	require.EqualValues(t, 1, b.SnapshotStats().Loaded)
}

// An append records the current version of a type with upcasters in the
// metadata, keeping the caller's keys, and nothing for other types; the
// stored bytes are as written (the log is never rewritten).
func TestUpcastVersionRecordedAtAppend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, &eventstore.Config{Upcasters: scaled(t, 10, 2)})
	e := pgdcb.MustEvent("Counted", map[string]int{"n": 5}, "c=1")
	e.Metadata = json.RawMessage(`{"by": "me"}`)
	_, err := s.Append(ctx, []pgdcb.Event{e, pgdcb.MustEvent("Other", 1, "c=1")})
	require.NoError(t, err)
	require.JSONEq(t, `{"by": "me"}`, string(e.Metadata), "the caller's event is not changed")
	rows, err := pool.Query(ctx, `SELECT type, coalesce(metadata::text, ''), data::text FROM `+ident.Schema(s)+`.events ORDER BY position`)
	require.NoError(t, err)
	got, err := pgxCollect3(rows)
	require.NoError(t, err)
	require.Equal(t, [][3]string{{"Counted", `{"by": "me", "pgdcb_version": 3}`, `{"n": 5}`}, {"Other", "", "1"}}, got)
	evs, _, err := s.ReadAll(ctx, query.Tagged([]string{"Counted"}, "c=1"), nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"n": 5}`, string(evs[0].Data), "written in the current shape: no upcaster runs")
}

func pgxCollect3(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) ([][3]string, error) {
	defer rows.Close()
	var out [][3]string
	for rows.Next() {
		var r [3]string
		if err := rows.Scan(&r[0], &r[1], &r[2]); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
