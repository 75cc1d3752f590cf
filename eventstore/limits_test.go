package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// offlineStore is a store whose pool is closed: any call that reaches for the
// server fails with "closed pool". An error other than that proves nothing
// was sent.
func offlineStore(t *testing.T, cfg *eventstore.Config) *eventstore.Store {
	t.Helper()
	pool := pgtest.Pool(t)
	pool.Close()
	s, err := eventstore.New(pool, cfg)
	require.NoError(t, err)
	return s
}

func requireInvalidEvent(t *testing.T, err error, index int, field string) *pgdcb.InvalidEventError {
	t.Helper()
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
	var ie *pgdcb.InvalidEventError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, index, ie.Index, err.Error())
	require.Equal(t, field, ie.Field, err.Error())
	require.Contains(t, err.Error(), field+": ")
	return ie
}

// Strings and JSON that Go accepts but the server refuses get a typed error
// naming the event and the field, before anything is sent, and nothing is
// written.
func TestServerRefusedInputIsTypedBeforeSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	live, _ := newStore(t, nil)
	offline := offlineStore(t, nil)
	good := pgdcb.MustEvent("Ok", 1, "k=v")
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	cases := []struct {
		name  string
		ev    pgdcb.Event
		field string
	}{
		{"type invalid UTF-8", pgdcb.Event{Type: "Bad\xff", Data: raw(`1`)}, "type"},
		{"type NUL", pgdcb.Event{Type: "Bad\x00", Data: raw(`1`)}, "type"},
		{"data invalid UTF-8", pgdcb.Event{Type: "X", Data: raw("\"\xff\"")}, "data"},
		{"data 1e999999", pgdcb.Event{Type: "X", Data: raw(`{"n":1e999999}`)}, "data"},
		{"data 1e-20000", pgdcb.Event{Type: "X", Data: raw(`[1e-20000]`)}, "data"},
		{"data lone surrogate", pgdcb.Event{Type: "X", Data: raw(`"\ud800"`)}, "data"},
		{"data low surrogate first", pgdcb.Event{Type: "X", Data: raw(`"\udc00\ud800"`)}, "data"},
		{"data NUL escape", pgdcb.Event{Type: "X", Data: raw(`{"a":"\u0000"}`)}, "data"},
		{"data too deep", pgdcb.Event{Type: "X", Data: raw(strings.Repeat("[", 513) + strings.Repeat("]", 513))}, "data"},
		{"metadata invalid UTF-8", pgdcb.Event{Type: "X", Data: raw(`1`), Metadata: raw("{\"a\":\"\xc3\"}")}, "metadata"},
		{"metadata 1e999999", pgdcb.Event{Type: "X", Data: raw(`1`), Metadata: raw(`1e999999`)}, "metadata"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := offline.Append(ctx, []pgdcb.Event{good, c.ev})
			requireInvalidEvent(t, err, 1, c.field)
			_, err = live.Append(ctx, []pgdcb.Event{good, c.ev})
			requireInvalidEvent(t, err, 1, c.field)
			_, err = live.AppendIf(ctx, []pgdcb.Event{c.ev}, appendif.FailIf(query.Tagged(nil, "k=v"), nil))
			requireInvalidEvent(t, err, 0, c.field)
			requireNoEvents(t, live)
		})
	}
	// Reads refuse a type the server would refuse, too.
	_, _, err := offline.ReadAll(ctx, query.New(query.Item{Types: []string{"Bad\xff"}}), nil)
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	require.Contains(t, err.Error(), "not valid UTF-8")

	// What jsonb accepts is stored as sent.
	ok := []string{`"\ud83d\ude00"`, `1e131071`, `1e-16383`, strings.Repeat("[", 512) + strings.Repeat("]", 512)}
	for _, d := range ok {
		t.Run(d[:min(len(d), 20)], func(t *testing.T) {
			_, err := live.Append(ctx, []pgdcb.Event{{Type: "X", Data: raw(d)}})
			require.NoError(t, err, d[:min(len(d), 20)])
		})
	}
	require.Equal(t, len(ok), countEvents(t, live, query.All()))
}

func TestSizeLimits(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, nil)
	cfg := s.Config()
	require.Equal(t, storekit.DefaultMaxEventBytes, cfg.MaxEventBytes)
	require.Equal(t, storekit.DefaultMaxBatchBytes, cfg.MaxBatchBytes)

	// payload builds an event of exactly size bytes (type, tag, data).
	payload := func(size int) pgdcb.Event {
		e := pgdcb.MustEvent("Big", nil, "k=v")
		e.Data = json.RawMessage(`"` + strings.Repeat("x", size-len("Big")-len("k=v")-2) + `"`)
		require.Equal(t, size, e.Size())
		return e
	}
	_, err := s.Append(ctx, []pgdcb.Event{payload(1 << 20)})
	require.NoError(t, err, "an event of exactly MaxEventBytes is accepted")

	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Ok", 1), payload(1<<20 + 1)})
	ie := requireInvalidEvent(t, err, 1, "size")
	require.Contains(t, ie.Reason, "1048577 bytes")
	require.Contains(t, ie.Reason, "MaxEventBytes 1048576")

	// 17 events of 1 MiB: over MaxBatchBytes, refused as a batch.
	batch := make([]pgdcb.Event, 17)
	for i := range batch {
		batch[i] = payload(1 << 20)
	}
	_, err = s.Append(ctx, batch)
	requireInvalidEvent(t, err, -1, "batch")
	require.Contains(t, err.Error(), "MaxBatchBytes 16777216")
	require.Equal(t, 1, countEvents(t, s, query.All()), "nothing of the refused appends was written")

	// Metadata and tags count too.
	e := payload(1 << 20)
	e.Metadata = json.RawMessage(`{}`)
	_, err = s.Append(ctx, []pgdcb.Event{e})
	requireInvalidEvent(t, err, 0, "size")

	// A 50 MB payload is refused at once, without anything being sent (the
	// store is offline) and before its JSON is read: the payload is not
	// valid JSON (its string is never closed), so a store that parsed it
	// first would report that, not the size. (This was a timing, under
	// 100 ms, which a loaded machine can break.)
	offline := offlineStore(t, nil)
	huge := pgdcb.Event{Type: "Huge", Data: json.RawMessage(`"` + strings.Repeat("y", 50<<20))}
	_, err = offline.Append(ctx, []pgdcb.Event{huge})
	requireInvalidEvent(t, err, 0, "size")
	_, err = s.Append(ctx, []pgdcb.Event{huge})
	requireInvalidEvent(t, err, 0, "size")
	require.Equal(t, 1, countEvents(t, s, query.All()))

	// Configured limits.
	small, _ := newStore(t, &eventstore.Config{MaxEventBytes: 100, MaxBatchBytes: 150})
	_, err = small.Append(ctx, []pgdcb.Event{payload(100)})
	require.NoError(t, err)
	_, err = small.Append(ctx, []pgdcb.Event{payload(101)})
	requireInvalidEvent(t, err, 0, "size")
	_, err = small.Append(ctx, []pgdcb.Event{payload(80), payload(80)})
	requireInvalidEvent(t, err, -1, "batch")

	// A MaxEventBytes above the default batch limit raises it.
	large := offlineStore(t, &eventstore.Config{MaxEventBytes: 32 << 20})
	require.Equal(t, 32<<20, large.Config().MaxBatchBytes)
}

func TestConfigRefusesNegatives(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, c := range []struct {
		field string
		cfg   eventstore.Config
	}{
		{"MaxBatchSize", eventstore.Config{MaxBatchSize: -1}},
		{"MaxLockKeys", eventstore.Config{MaxLockKeys: -5}},
		{"MaxEventBytes", eventstore.Config{MaxEventBytes: -1}},
		{"MaxBatchBytes", eventstore.Config{MaxBatchBytes: -1}},
	} {
		t.Run(c.field, func(t *testing.T) {
			_, err := eventstore.New(pool, &c.cfg)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, c.field)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia)
			require.Equal(t, "Config."+c.field, ia.Name)
			require.Contains(t, ia.Reason, "must not be negative")
			require.Contains(t, ia.Reason, "0 means the default")
		})
	}
	for _, c := range []struct {
		field string
		cfg   eventstore.Config
	}{
		{"MaxEventBytes over MaxBytesLimit", eventstore.Config{MaxEventBytes: storekit.MaxBytesLimit + 1}},
		{"MaxBatchBytes over MaxBytesLimit", eventstore.Config{MaxBatchBytes: storekit.MaxBytesLimit + 1}},
	} {
		t.Run(c.field, func(t *testing.T) {
			_, err := eventstore.New(pool, &c.cfg)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
			require.Contains(t, err.Error(), "MaxBytesLimit")
		})
	}
	// 0 means the default.
	s, err := eventstore.New(pool, &eventstore.Config{})
	require.NoError(t, err)
	cfg := s.Config()
	require.Equal(t, storekit.DefaultMaxBatchSize, cfg.MaxBatchSize)
	require.Equal(t, eventstore.DefaultMaxLockKeys, cfg.MaxLockKeys)
}

// Errors repeat their input cut to a bounded size; their fields keep it whole.
func TestErrorMessagesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", 1, "account=a1")})
	require.NoError(t, err)

	// A 10,000-item query: the condition error and the idempotency error.
	items := make([]query.Item, 10000)
	for i := range items {
		items[i] = query.Item{Types: []string{"Opened"}, Tags: tags.MustParseSet(fmt.Sprintf("account=a%d", i+1))}
	}
	big := query.New(items...)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1)}, appendif.FailIf(big, nil))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	require.Less(t, len(err.Error()), 1024, "condition error: %d bytes", len(err.Error()))
	require.Contains(t, err.Error(), "bytes)")
	var ce *appendif.ConditionFailedError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Query.Items(), 10000, "the field keeps the whole query")

	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1)}, appendif.Condition{Idempotency: big})
	require.ErrorIs(t, err, pgdcb.ErrIdempotent)
	require.Less(t, len(err.Error()), 1024, "idempotency error: %d bytes", len(err.Error()))
	var ie *appendif.IdempotentError
	require.ErrorAs(t, err, &ie)
	require.Len(t, ie.Query.Items(), 10000)

	// A 1 MB tag.
	long := "k=" + strings.Repeat("v", 1<<20)
	_, err = pgdcb.NewEvent("X", 1, long)
	require.ErrorIs(t, err, pgdcb.ErrInvalidTag)
	require.Less(t, len(err.Error()), 1024, "tag error: %d bytes", len(err.Error()))
	var te *tags.InvalidTagError
	require.ErrorAs(t, err, &te)
	require.Equal(t, long, te.Tag)

	// A 1 MB type.
	longType := strings.Repeat("T", 1<<20)
	_, err = s.Append(ctx, []pgdcb.Event{{Type: longType, Data: json.RawMessage(`1`)}})
	ev := requireInvalidEvent(t, err, 0, "type")
	require.Less(t, len(err.Error()), 1024, "type error: %d bytes", len(err.Error()))
	require.Equal(t, longType, ev.Type)
	_, _, err = s.ReadAll(ctx, query.New(query.Item{Types: []string{longType}}), nil)
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	require.Less(t, len(err.Error()), 1024, "query error: %d bytes", len(err.Error()))
	require.Equal(t, 1, countEvents(t, s, query.All()))
	require.False(t, errors.Is(err, pgdcb.ErrInvalidEvent))
}
