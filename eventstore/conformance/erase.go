package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

// eraser is a store that forgets subjects (crypto-shredding).
type eraser interface {
	Erase(ctx context.Context, subject string) (pgdcb.AppendResult, error)
}

// testErasure: fields marked pgdcb.Personal read back as written; after
// Erase(subject) they read as null, in every read, while the other
// subject's field of the same event, the plain fields, types, tags and
// positions stay; Erase appends a pgdcb.ErasedEventType event tagged
// pgdcb.subject=<subject>; a later append for the subject is readable (a
// new key); a subject that cannot be a tag value is refused. A store
// without Erase skips it.
func testErasure(t testing.TB, s pgdcb.Store, _ Options) {
	e, ok := s.(eraser)
	if !ok {
		t.Skip("the store has no Erase")
	}
	ctx := context.Background()
	appendOK(t, s, ev("Opened", map[string]any{"id": 1, "owner": pgdcb.Personal("u1", "Ada"),
		"witness": pgdcb.Personal("u2", map[string]any{"name": "Bob"})}, "account=1"))
	q := query.Tagged(nil, "account=1")
	before := readAll(t, s, q)
	require.Len(t, before, 1)
	require.JSONEq(t, `{"id": 1, "owner": "Ada", "witness": {"name": "Bob"}}`, string(before[0].Data), "opened on read")

	res, err := e.Erase(ctx, "u1")
	require.NoError(t, err)
	require.Len(t, res.Positions, 1)
	after := readAll(t, s, q)
	require.Len(t, after, 1)
	require.Equal(t, `{"id": 1, "owner": null, "witness": {"name": "Bob"}}`, string(after[0].Data))
	require.Equal(t, before[0].Position, after[0].Position)
	require.Equal(t, before[0].Type, after[0].Type)
	require.Equal(t, before[0].Tags, after[0].Tags)
	last, _, err := s.ReadLast(ctx, q)
	require.NoError(t, err)
	require.Equal(t, string(after[0].Data), string(last.Data), "ReadLast")
	n := pgdcb.NewModel(q, "", func(_ string, ev pgdcb.StoredEvent) string { return string(ev.Data) })
	_, err = s.Project(ctx, n)
	require.NoError(t, err)
	require.Equal(t, string(after[0].Data), n.State, "Project")

	erased := readAll(t, s, query.Tagged([]string{pgdcb.ErasedEventType}, "pgdcb.subject=u1"))
	require.Len(t, erased, 1)
	require.Equal(t, res.Positions[0], erased[0].Position)
	require.Equal(t, `{"subject": "u1"}`, string(erased[0].Data))

	appendOK(t, s, ev("Renamed", map[string]any{"owner": pgdcb.Personal("u1", "Ada L.")}, "account=1"))
	evs := readAll(t, s, q)
	require.Len(t, evs, 2)
	require.Equal(t, `{"owner": "Ada L."}`, string(evs[1].Data), "sealed under the subject's new key")
	require.Equal(t, string(after[0].Data), string(evs[0].Data), "the old key stays destroyed")

	_, err = e.Erase(ctx, "")
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	_, err = s.Append(ctx, []pgdcb.Event{{Type: "X", Data: []byte(`{"pgdcb.personal": {"subject": "u", "value": 1, "extra": 2}}`)}})
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
}
