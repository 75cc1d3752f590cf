package runstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
)

// requireField checks err is an input error of the runstore naming field,
// with a bounded message.
func requireField(t *testing.T, err error, field, what string) {
	t.Helper()
	require.Error(t, err, what)
	require.ErrorIs(t, err, runstore.ErrInvalidInput, "%s: %v", what, err)
	var ve *runstore.ValidationError
	require.ErrorAs(t, err, &ve, what)
	require.Equal(t, field, ve.Field, "%s: %v", what, err)
	require.NotErrorIs(t, err, pgdcb.ErrInvalidEvent, what)
	require.Less(t, len(err.Error()), 1024, "%s: a %d-byte message", what, len(err.Error()))
}

func goodEvent(runID, key string) runstore.CanonicalEngineEvent {
	return runstore.CanonicalEngineEvent{
		RunID: runID, EventType: "RunStarted", IdempotencyKey: key,
		EmittedAt: "2026-02-11T10:00:00.123Z", EventData: json.RawMessage(`{"ok":true}`),
	}
}

// Every field of AppendEvent, with every kind of bad value the event store or
// the server would refuse (or JSON encoding would silently change): a
// *ValidationError naming the contract's field, and nothing written.
func TestAppendEventInputErrorsNameTheField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, nil)
	long := func(n int) string { return strings.Repeat("x", n) }
	big := json.RawMessage(`"` + long(2<<20) + `"`)
	cases := []struct {
		field string
		edit  func(*runstore.CanonicalEngineEvent)
	}{
		{"runId", func(e *runstore.CanonicalEngineEvent) { e.RunID = "" }},
		{"runId", func(e *runstore.CanonicalEngineEvent) { e.RunID = long(257) }},
		{"runId", func(e *runstore.CanonicalEngineEvent) { e.RunID = "r\xff" }},
		{"runId", func(e *runstore.CanonicalEngineEvent) { e.RunID = "r\x00" }},
		{"runId", func(e *runstore.CanonicalEngineEvent) { e.RunID = long(1 << 20) }},
		{"eventType", func(e *runstore.CanonicalEngineEvent) { e.EventType = "" }},
		{"eventType", func(e *runstore.CanonicalEngineEvent) { e.EventType = long(65) }},
		{"eventType", func(e *runstore.CanonicalEngineEvent) { e.EventType = "Run\xff" }},
		{"eventType", func(e *runstore.CanonicalEngineEvent) { e.EventType = "Run\x00" }},
		{"idempotencyKey", func(e *runstore.CanonicalEngineEvent) { e.IdempotencyKey = "" }},
		{"idempotencyKey", func(e *runstore.CanonicalEngineEvent) { e.IdempotencyKey = "k\xff" }},
		{"idempotencyKey", func(e *runstore.CanonicalEngineEvent) { e.IdempotencyKey = long(300) }},
		{"stepId", func(e *runstore.CanonicalEngineEvent) { e.StepID = "s\xff" }},
		{"stepId", func(e *runstore.CanonicalEngineEvent) { e.StepID = long(300) }},
		{"eventId", func(e *runstore.CanonicalEngineEvent) { e.EventID = "nope" }},
		{"eventId", func(e *runstore.CanonicalEngineEvent) { e.EventID = long(1 << 20) }},
		{"causedBySignalId", func(e *runstore.CanonicalEngineEvent) { e.CausedBySignalID = "123" }},
		{"parentEventId", func(e *runstore.CanonicalEngineEvent) { e.ParentEventID = "p\xff" }},
		{"engineAttemptId", func(e *runstore.CanonicalEngineEvent) { e.EngineAttemptID = "a\xff" }},
		{"engineAttemptId", func(e *runstore.CanonicalEngineEvent) { e.EngineAttemptID = "a\x00" }},
		{"logicalAttemptId", func(e *runstore.CanonicalEngineEvent) { e.LogicalAttemptID = "l\xff" }},
		{"logicalAttemptId", func(e *runstore.CanonicalEngineEvent) { e.LogicalAttemptID = "l\x00" }},
		{"adapterVersion", func(e *runstore.CanonicalEngineEvent) { e.AdapterVersion = "v\xff" }},
		{"adapterVersion", func(e *runstore.CanonicalEngineEvent) { e.AdapterVersion = "v\x00" }},
		{"eventData", func(e *runstore.CanonicalEngineEvent) { e.EventData = json.RawMessage(`{"a":`) }},
		{"eventData", func(e *runstore.CanonicalEngineEvent) { e.EventData = json.RawMessage(`{"a":"\u0000"}`) }},
		{"eventData", func(e *runstore.CanonicalEngineEvent) { e.EventData = json.RawMessage("\"\xff\"") }},
		{"eventData", func(e *runstore.CanonicalEngineEvent) { e.EventData = json.RawMessage(`1e999999`) }},
		{"eventData", func(e *runstore.CanonicalEngineEvent) { e.EventData = json.RawMessage(`"\ud800"`) }},
		{"eventData", func(e *runstore.CanonicalEngineEvent) { e.EventData = big }},
		{"engineRunRef", func(e *runstore.CanonicalEngineEvent) { e.EngineRunRef = json.RawMessage(`nope`) }},
		{"engineRunRef", func(e *runstore.CanonicalEngineEvent) { e.EngineRunRef = json.RawMessage(`"\u0000"`) }},
		{"engineRunRef", func(e *runstore.CanonicalEngineEvent) { e.EngineRunRef = big }},
		{"emittedAt", func(e *runstore.CanonicalEngineEvent) { e.EmittedAt = "" }},
		{"emittedAt", func(e *runstore.CanonicalEngineEvent) { e.EmittedAt = "yesterday" }},
		{"emittedAt", func(e *runstore.CanonicalEngineEvent) { e.EmittedAt = long(1 << 20) }},
	}
	for i, c := range cases {
		what := c.field + " case " + strconv.Itoa(i)
		t.Run(what, func(t *testing.T) {
			ev := goodEvent("run-bad", "key-bad")
			c.edit(&ev)
			_, err := s.AppendEvent(ctx, ev)
			requireField(t, err, c.field, what)
		})
	}
	evs, _, err := s.EventStore().ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Empty(t, evs, "nothing written for bad input")

	// Just under the event store's MaxEventBytes is fine.
	ev := goodEvent("run-ok", "key-ok")
	ev.EventData = json.RawMessage(`"` + long(1<<20-1024) + `"`)
	res, err := s.AppendEvent(ctx, ev)
	require.NoError(t, err)
	require.True(t, res.Persisted)
}

func TestOtherCallsInputErrorsNameTheField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, nil)
	for _, c := range []struct{ name, id string }{
		{"empty", ""}, {"invalid UTF-8", "r\xff"}, {"NUL", "r\x00"}, {"too long", strings.Repeat("r", 257)},
	} {
		t.Run("runId "+c.name, func(t *testing.T) {
			id := c.id
			_, err := s.FetchEvents(ctx, id, nil)
			requireField(t, err, "runId", "FetchEvents")
			_, err = s.GetSnapshot(ctx, id)
			requireField(t, err, "runId", "GetSnapshot")
			_, err = s.ProjectSnapshot(ctx, id)
			requireField(t, err, "runId", "ProjectSnapshot")
			_, err = s.DeleteRun(ctx, id)
			requireField(t, err, "runId", "DeleteRun")
			_, err = s.ExportRun(ctx, id, &bytes.Buffer{})
			requireField(t, err, "runId", "ExportRun")
		})
	}
	_, err := s.FetchEvents(ctx, "r1", &runstore.FetchOptions{AfterSeq: -1, Limit: 1})
	requireField(t, err, "afterSeq", "FetchEvents")
	for _, lim := range []int{0, -1, runstore.DefaultMaxFetchLimit + 1} {
		t.Run(fmt.Sprint("limit=", lim), func(t *testing.T) {
			_, err := s.FetchEvents(ctx, "r1", &runstore.FetchOptions{Limit: lim})
			requireField(t, err, "limit", "FetchEvents")
		})
	}
	_, err = s.ExportRun(ctx, "r1", nil)
	requireField(t, err, "w", "ExportRun")
}

func TestNewRefusesNegativeConfig(t *testing.T) {
	t.Parallel()
	es, _ := teststore.New(t, nil)
	_, err := runstore.New(nil, nil)
	requireField(t, err, "eventstore", "New")
	for _, c := range []struct {
		field string
		cfg   runstore.Config
	}{
		{"MaxFetchLimit", runstore.Config{MaxFetchLimit: -1}},
		{"SeqCacheSize", runstore.Config{SeqCacheSize: -1}},
		{"MaxAppendAttempts", runstore.Config{MaxAppendAttempts: -1}},
		{"ProjectorBatch", runstore.Config{ProjectorBatch: -1}},
		{"PollInterval", runstore.Config{PollInterval: -time.Millisecond}},
		{"ResyncLag", runstore.Config{ResyncLag: -time.Second}},
		{"ProjectorName", runstore.Config{ProjectorName: "p\xff"}},
		{"ProjectorName", runstore.Config{ProjectorName: "p\x00"}},
	} {
		t.Run(c.field, func(t *testing.T) {
			_, err := runstore.New(es, &c.cfg)
			requireField(t, err, "Config."+c.field, c.field)
			require.ErrorIs(t, err, pgdcb.ErrInvalidArgument, c.field)
			var ia *pgdcb.InvalidArgumentError
			require.ErrorAs(t, err, &ia)
			require.Equal(t, "Config."+c.field, ia.Name)
		})
	}
	_, err = runstore.New(es, &runstore.Config{SeqCacheSize: -1})
	require.Contains(t, err.Error(), "SeqCacheDisabled", "the error says how to turn the cache off")
	_, err = runstore.New(es, &runstore.Config{SeqCacheDisabled: true})
	require.NoError(t, err)
}
