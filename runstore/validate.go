package runstore

import (
	"encoding/json"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/pgjson"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Tag keys of run events.
const (
	tagRunID          = "run_id"
	tagStepID         = "step_id"
	tagIdempotencyKey = "idempotency_key"
)

// prepare is the package-level prepare plus the size check against the event
// store's MaxEventBytes: every input the event store would refuse is refused
// here first, as a *ValidationError naming the contract's field.
func (s *Store) prepare(ev CanonicalEngineEvent) (CanonicalEngineEvent, tags.Set, error) {
	ev, ts, err := prepare(ev)
	if err != nil {
		return ev, ts, err
	}
	if err := checkSize(ev, ts, s.es.Config().MaxEventBytes); err != nil {
		return ev, tags.Set{}, err
	}
	return ev, ts, nil
}

// checkSize refuses an event whose stored form (the event as JSON, with the
// largest runSeq, plus its type, tags and the marker) would exceed the event
// store's MaxEventBytes, naming its largest field. It encodes the event only
// when a bound without encoding does not settle it.
func checkSize(ev CanonicalEngineEvent, ts tags.Set, limit int) error {
	fixed := len(ev.EventType) + ts.Size() + len(marker)
	// JSON escapes a byte of a string into at most 6 bytes; RawMessages are
	// compacted, never grown; the names and punctuation of the 15 fields and
	// a 19-digit runSeq take less than 512 bytes.
	strs := len(ev.RunID) + len(ev.EventID) + len(ev.StepID) + len(ev.EngineAttemptID) +
		len(ev.LogicalAttemptID) + len(ev.EventType) + len(ev.IdempotencyKey) + len(ev.EmittedAt) +
		len(ev.AdapterVersion) + len(ev.CausedBySignalID) + len(ev.ParentEventID)
	if fixed+6*strs+len(ev.EventData)+len(ev.EngineRunRef)+512 <= limit {
		return nil
	}
	ev.RunSeq = math.MaxInt64
	data, err := json.Marshal(ev)
	if err != nil {
		return invalid("eventData", "cannot be encoded: %v", err)
	}
	size := fixed + len(data)
	if size <= limit {
		return nil
	}
	field, n := "eventData", len(ev.EventData)
	for _, f := range []struct {
		name string
		n    int
	}{
		{"engineRunRef", len(ev.EngineRunRef)}, {"engineAttemptId", len(ev.EngineAttemptID)},
		{"logicalAttemptId", len(ev.LogicalAttemptID)}, {"adapterVersion", len(ev.AdapterVersion)},
	} {
		if f.n > n {
			field, n = f.name, f.n
		}
	}
	return invalid(field, "the event takes %d bytes stored (%s %d), more than the event store's MaxEventBytes %d",
		size, field, n, limit)
}

// prepare validates ev and returns its normalised copy and its tags. Nothing
// is written when it fails.
func prepare(ev CanonicalEngineEvent) (CanonicalEngineEvent, tags.Set, error) {
	if ev.RunID == "" {
		return ev, tags.Set{}, invalid("runId", "missing")
	}
	runTag, err := tags.New(tagRunID, ev.RunID)
	if err != nil {
		return ev, tags.Set{}, invalid("runId", "%v", err)
	}
	ts := []tags.Tag{runTag}
	if ev.EventType == "" {
		return ev, tags.Set{}, invalid("eventType", "missing")
	}
	if err := query.ValidateType(ev.EventType); err != nil {
		return ev, tags.Set{}, invalid("eventType", "%v", err)
	}
	if ev.IdempotencyKey == "" {
		return ev, tags.Set{}, invalid("idempotencyKey", "missing")
	}
	keyTag, err := tags.New(tagIdempotencyKey, ev.IdempotencyKey)
	if err != nil {
		return ev, tags.Set{}, invalid("idempotencyKey", "%v", err)
	}
	ts = append(ts, keyTag)
	if ev.StepID != "" {
		stepTag, err := tags.New(tagStepID, ev.StepID)
		if err != nil {
			return ev, tags.Set{}, invalid("stepId", "%v", err)
		}
		ts = append(ts, stepTag)
	}
	if ev.EventID == "" {
		ev.EventID = uuid.NewString()
	} else if err := checkUUID(ev.EventID); err != nil {
		return ev, tags.Set{}, invalid("eventId", "%v", err)
	}
	if ev.CausedBySignalID != "" {
		if err := checkUUID(ev.CausedBySignalID); err != nil {
			return ev, tags.Set{}, invalid("causedBySignalId", "%v", err)
		}
	}
	if ev.ParentEventID != "" {
		if err := checkUUID(ev.ParentEventID); err != nil {
			return ev, tags.Set{}, invalid("parentEventId", "%v", err)
		}
	}
	for _, f := range []struct{ name, v string }{
		{"engineAttemptId", ev.EngineAttemptID},
		{"logicalAttemptId", ev.LogicalAttemptID},
		{"adapterVersion", ev.AdapterVersion},
	} {
		if err := checkText(f.v); err != nil {
			return ev, tags.Set{}, invalid(f.name, "%v", err)
		}
	}
	if len(ev.EventData) == 0 {
		ev.EventData = json.RawMessage("null")
	} else if err := pgjson.Validate(ev.EventData); err != nil {
		return ev, tags.Set{}, invalid("eventData", "not valid JSON for PostgreSQL's jsonb: %v", err)
	}
	if len(ev.EngineRunRef) > 0 {
		if err := pgjson.Validate(ev.EngineRunRef); err != nil {
			return ev, tags.Set{}, invalid("engineRunRef", "not valid JSON for PostgreSQL's jsonb: %v", err)
		}
	}
	if ev.EmittedAt == "" {
		return ev, tags.Set{}, invalid("emittedAt", "missing")
	}
	if _, err := parseTime(ev.EmittedAt); err != nil {
		return ev, tags.Set{}, invalid("emittedAt", "not an ISO 8601 (RFC 3339) timestamp: %s", clip.Quote(ev.EmittedAt))
	}
	set, err := tags.NewSet(ts...)
	if err != nil {
		return ev, tags.Set{}, invalid("tags", "%v", err)
	}
	ev.RunSeq = 0
	ev.PersistedAt = ""
	return ev, set, nil
}

// checkUUID accepts the canonical 36-character form only.
func checkUUID(s string) error {
	if len(s) != 36 {
		return &uuidError{s}
	}
	if _, err := uuid.Parse(s); err != nil {
		return &uuidError{s}
	}
	return nil
}

type uuidError struct{ s string }

func (e *uuidError) Error() string { return "not a UUID: " + clip.Quote(e.s) }

// checkText refuses what JSON encoding would silently change (invalid UTF-8
// becomes U+FFFD) or what jsonb cannot store (NUL, encoded as \u0000).
func checkText(s string) error {
	switch {
	case !utf8.ValidString(s):
		return &textError{s, "is not valid UTF-8"}
	case strings.IndexByte(s, 0) >= 0:
		return &textError{s, "contains NUL"}
	}
	return nil
}

type textError struct{ s, reason string }

func (e *textError) Error() string { return clip.Quote(e.s) + " " + e.reason }

// parseTime parses the RFC 3339 profile of ISO 8601, with or without
// fractional seconds.
func parseTime(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, s)
}

// validateRunID refuses a runId that is missing or not a valid tag value
// (1..256 bytes of UTF-8 without NUL), as a *ValidationError naming "runId".
func validateRunID(runID string) error {
	if runID == "" {
		return invalid("runId", "missing")
	}
	if _, err := tags.New(tagRunID, runID); err != nil {
		return invalid("runId", "%v", err)
	}
	return nil
}

// validateFetch is FetchEvents' input validation: nil opts mean AfterSeq 0
// and defaultFetchLimit; given opts need AfterSeq >= 0 and
// 1 <= Limit <= maxLimit. It returns the options to use or a
// *ValidationError naming "runId", "afterSeq" or "limit".
func validateFetch(runID string, opts *FetchOptions, maxLimit int) (FetchOptions, error) {
	o := FetchOptions{Limit: defaultFetchLimit}
	if opts != nil {
		o = *opts
	}
	if err := validateRunID(runID); err != nil {
		return o, err
	}
	if o.AfterSeq < 0 {
		return o, invalid("afterSeq", "must be >= 0, got %d", o.AfterSeq)
	}
	if o.Limit <= 0 || o.Limit > maxLimit {
		return o, invalid("limit", "must be 1..%d, got %d", maxLimit, o.Limit)
	}
	return o, nil
}
