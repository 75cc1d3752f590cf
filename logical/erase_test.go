package logical_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
)

// A logical reader opens sealed fields like every read: in clear before
// Erase; null after it, whether the event comes from the stream (decoded
// after the erasure) or from a new reader's initial read. The other
// subject's field stays readable.
func TestLogicalReaderAfterErase(t *testing.T) {
	plain, pool := newStore(t)
	kek, err := eventstore.NewAESKeyWrapper(make([]byte, 32))
	require.NoError(t, err)
	store, err := eventstore.New(pool, &eventstore.Config{Schema: plain.Schema(), KEK: kek})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	const marker = "Ada-Lovelace-logical"

	var mu sync.Mutex
	seen := map[string][]string{} // reader → data of the Opened events, in order
	handler := func(name string) func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		return func(_ context.Context, _ pgx.Tx, evs []pgdcb.StoredEvent) error {
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range evs {
				if ev.Type == "Opened" {
					seen[name] = append(seen[name], string(ev.Data))
				}
			}
			return nil
		}
	}
	got := func(name string, n int) []string {
		t.Helper()
		var out []string
		await.True(t, deadline, name+" handled the events", func() bool {
			mu.Lock()
			defer mu.Unlock()
			out = append([]string(nil), seen[name]...)
			return len(out) >= n
		})
		return out
	}
	opened := func() pgdcb.Event {
		return pgdcb.MustEvent("Opened", map[string]any{"owner": pgdcb.Personal("u1", marker), "witness": pgdcb.Personal("u2", "Bob")}, "wallet=w1")
	}

	stop := startRunner(t, store, "p1", handler("p1"), projConfig())
	_, err = store.Append(t.Context(), []pgdcb.Event{opened()})
	require.NoError(t, err)
	require.Equal(t, `{"owner": "`+marker+`", "witness": "Bob"}`, got("p1", 1)[0], "opened before the erasure")
	stop()

	_, err = store.Append(t.Context(), []pgdcb.Event{opened()})
	require.NoError(t, err)
	_, err = store.Erase(t.Context(), "u1")
	require.NoError(t, err)
	startRunner(t, store, "p1", handler("p1"), projConfig())
	require.Equal(t, `{"owner": null, "witness": "Bob"}`, got("p1", 2)[1], "streamed after the erasure")

	startRunner(t, store, "p2", handler("p2"), projConfig())
	for _, d := range got("p2", 2) {
		require.Equal(t, `{"owner": null, "witness": "Bob"}`, d, "a new reader's initial read")
		require.False(t, strings.Contains(d, marker))
	}
}
