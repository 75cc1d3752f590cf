package runstore

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Tag keys of run events.
const (
	TagRunID          = "run_id"
	TagStepID         = "step_id"
	TagIdempotencyKey = "idempotency_key"
)

// prepare validates ev and returns its normalised copy and its tags. Nothing
// is written when it fails.
func prepare(ev CanonicalEngineEvent) (CanonicalEngineEvent, tags.Set, error) {
	if ev.RunID == "" {
		return ev, tags.Set{}, invalid("runId", "missing")
	}
	runTag, err := tags.New(TagRunID, ev.RunID)
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
	keyTag, err := tags.New(TagIdempotencyKey, ev.IdempotencyKey)
	if err != nil {
		return ev, tags.Set{}, invalid("idempotencyKey", "%v", err)
	}
	ts = append(ts, keyTag)
	if ev.StepID != "" {
		stepTag, err := tags.New(TagStepID, ev.StepID)
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
	if len(ev.EventData) == 0 {
		ev.EventData = json.RawMessage("null")
	} else if !json.Valid(ev.EventData) {
		return ev, tags.Set{}, invalid("eventData", "not valid JSON")
	}
	if len(ev.EngineRunRef) > 0 && !json.Valid(ev.EngineRunRef) {
		return ev, tags.Set{}, invalid("engineRunRef", "not valid JSON")
	}
	if ev.EmittedAt == "" {
		return ev, tags.Set{}, invalid("emittedAt", "missing")
	}
	if _, err := parseTime(ev.EmittedAt); err != nil {
		return ev, tags.Set{}, invalid("emittedAt", "not an ISO 8601 (RFC 3339) timestamp: %q", ev.EmittedAt)
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

func (e *uuidError) Error() string { return "not a UUID: " + quote(e.s) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// parseTime parses the RFC 3339 profile of ISO 8601, with or without
// fractional seconds.
func parseTime(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, s)
}

func validateRunID(runID string) error {
	if runID == "" {
		return invalid("runId", "missing")
	}
	if _, err := tags.New(TagRunID, runID); err != nil {
		return invalid("runId", "%v", err)
	}
	return nil
}
