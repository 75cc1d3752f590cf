package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/effects"
)

func TestDuplicateRequestCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	q := newQueue(t, s)
	r := effects.Request{Type: "send_message", Session: "u1:a1:t1", DedupeKey: "k1", Payload: json.RawMessage(`{"content":"hi"}`)}
	id, created, err := q.Request(ctx, r)
	require.NoError(t, err)
	require.True(t, created)
	head1, err := s.Head(ctx)
	require.NoError(t, err)

	id2, created, err := q.Request(ctx, r)
	require.NoError(t, err)
	require.False(t, created, "a duplicate must not be created")
	require.Equal(t, id, id2, "a duplicate returns the existing effect's id")
	head2, err := s.Head(ctx)
	require.NoError(t, err)
	require.Equal(t, head1.Position, head2.Position, "a duplicate appends nothing")

	// Concurrent duplicates: exactly one creates.
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]int{}
	createdN := 0
	for range 8 {
		wg.Go(func() {
			id, c, err := q.Request(ctx, effects.Request{Type: "send_message", Session: "u1:a1:t1", DedupeKey: "k2"})
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			ids[id]++
			if c {
				createdN++
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, createdN)
	require.Len(t, ids, 1)
	for id := range ids {
		require.Equal(t, 1, countEvents(t, s, effects.TypeRequested, id))
	}

	e, err := q.Effect(ctx, id)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, e.State)
	require.Equal(t, "send_message", e.Type)
	require.Equal(t, "k1", e.DedupeKey)
	require.JSONEq(t, `{"content":"hi"}`, string(e.Payload))
}

func TestRequestRefusesInvalidInput(t *testing.T) {
	t.Parallel()
	q := newQueue(t, newStore(t))
	for name, r := range map[string]effects.Request{
		"Request.Type":      {Session: "s", DedupeKey: "k"},
		"Request.Session":   {Type: "t", DedupeKey: "k"},
		"Request.DedupeKey": {Type: "t", Session: "s"},
		"Request.Payload":   {Type: "t", Session: "s", DedupeKey: "k", Payload: json.RawMessage(`{`)},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := q.Request(context.Background(), r)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia, name)
			require.Equal(t, name, ia.Name)
		})
	}
}

func TestConfigRefusesNegativeValues(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	h := map[string]effects.Handler{"t": func(context.Context, effects.Effect) error { return nil }}
	for name, cfg := range map[string]effects.Config{
		"Config.Lease":        {Handlers: h, Lease: -1},
		"Config.MaxAttempts":  {Handlers: h, MaxAttempts: -1},
		"Config.RetryMin":     {Handlers: h, RetryMin: -1},
		"Config.RetryMax":     {Handlers: h, RetryMax: -1},
		"Config.PollInterval": {Handlers: h, PollInterval: -1},
		"Config.BatchSize":    {Handlers: h, BatchSize: -1},
		"Config.Handlers":     {},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := effects.NewWorker(s, &cfg)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia, name)
			require.Equal(t, name, ia.Name)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
		})
	}
}

func TestEffectNotFound(t *testing.T) {
	t.Parallel()
	q := newQueue(t, newStore(t))
	_, err := q.Effect(context.Background(), "nope")
	var nf *effects.NotFoundError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, "nope", nf.ID)
	require.True(t, errors.Is(err, effects.ErrNotFound))
}

func TestPendingCountsAndPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	q := newQueue(t, s)
	var ids []string
	for _, k := range []string{"a", "b", "c"} {
		id, _, err := q.Request(ctx, effects.Request{Type: "t", Session: "s1", DedupeKey: k})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	other, _, err := q.Request(ctx, effects.Request{Type: "t", Session: "s2", DedupeKey: "d"})
	require.NoError(t, err)

	p, err := q.Pending(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, p, 3)
	for i, e := range p {
		require.Equal(t, ids[i], e.ID, "FIFO order")
	}

	// Run them all.
	done := make(chan string, 10)
	w, err := effects.NewWorker(s, &effects.Config{PollInterval: 50 * time.Millisecond,
		Handlers: map[string]effects.Handler{"t": func(_ context.Context, e effects.Effect) error {
			done <- e.ID
			return nil
		}}})
	require.NoError(t, err)
	runUntilCounts(t, q, 4, 0, 30*time.Second, w)
	require.Equal(t, int64(4), w.Stats().Executed)

	p, err = q.Pending(ctx, "s1")
	require.NoError(t, err)
	require.Empty(t, p)
	c, err := q.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, effects.Counts{Completed: 4}, c)

	// A pending effect is never purged; finished ones are.
	pendingID, _, err := q.Request(ctx, effects.Request{Type: "t", Session: "s3", DedupeKey: "e"})
	require.NoError(t, err)
	n, evs, err := q.Purge(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, int64(4*3), evs, "requested, started, completed per effect")
	_, err = q.Effect(ctx, other)
	require.ErrorIs(t, err, effects.ErrNotFound)
	e, err := q.Effect(ctx, pendingID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, e.State)
	c, err = q.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, effects.Counts{Pending: 1}, c)
}
