package runstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// CanonicalEngineEvent is a run event as the contract defines it. JSON names
// are the contract's.
type CanonicalEngineEvent struct {
	// RunID names the run. Required; 1..256 bytes of UTF-8 without NUL (it is
	// a tag value).
	RunID string `json:"runId"`
	// RunSeq is assigned by the store (ignored on append): strictly increasing
	// per run.
	RunSeq int64 `json:"runSeq"`
	// EventID is a UUID; empty on append means the store generates one.
	// Unique across the store.
	EventID string `json:"eventId"`
	// StepID is optional; when set it is a tag value (1..256 bytes).
	StepID string `json:"stepId,omitempty"`
	// EngineAttemptID is the platform-level retry counter. Optional.
	EngineAttemptID string `json:"engineAttemptId,omitempty"`
	// LogicalAttemptID is the business-level retry counter. Optional.
	LogicalAttemptID string `json:"logicalAttemptId,omitempty"`
	// EventType is "RunStarted", "StepCompleted", …: 1..64 bytes. Required.
	EventType string `json:"eventType"`
	// EventData is the event's JSON payload; empty means null.
	EventData json.RawMessage `json:"eventData"`
	// IdempotencyKey is unique per run (see IdempotencyKey). Required, 1..256
	// bytes.
	IdempotencyKey string `json:"idempotencyKey"`
	// EmittedAt is when the activity emitted the event: ISO 8601 (RFC 3339,
	// for example 2026-02-11T10:00:00.123Z). Required.
	EmittedAt string `json:"emittedAt"`
	// PersistedAt is set by the store (the appending transaction's start
	// time, RFC 3339 UTC); ignored on append.
	PersistedAt string `json:"persistedAt,omitempty"`
	// AdapterVersion is optional.
	AdapterVersion string `json:"adapterVersion,omitempty"`
	// EngineRunRef is the engine's reference (Temporal WorkflowId, …): JSON.
	// Optional.
	EngineRunRef json.RawMessage `json:"engineRunRef,omitempty"`
	// CausedBySignalID is an optional UUID.
	CausedBySignalID string `json:"causedBySignalId,omitempty"`
	// ParentEventID is an optional UUID.
	ParentEventID string `json:"parentEventId,omitempty"`
}

// AppendResult is what AppendEvent reports.
type AppendResult struct {
	// RunSeq is the event's runSeq: the new one, or the existing event's for
	// a duplicate.
	RunSeq int64
	// Idempotent is true when an event with the same idempotencyKey already
	// existed in the run (nothing was written).
	Idempotent bool
	// Persisted is true when this call wrote the event.
	Persisted bool
}

// FetchOptions are FetchEvents' options; nil means AfterSeq 0 and Limit
// 1000 (the contract's default).
type FetchOptions struct {
	// AfterSeq: only events with runSeq > AfterSeq (the watermark). >= 0.
	AfterSeq int64
	// Limit is the page size: 1..Config.MaxFetchLimit. Required when the
	// options are given (0 is refused, as the contract refuses limit <= 0);
	// use 1000 for the contract's default.
	Limit int
}

// defaultFetchLimit is the contract's default page size.
const defaultFetchLimit = 1000

// IdempotencyKey returns the contract's key: the lower-case hex SHA-256 of
// runId|stepId|logicalAttemptId|eventType|planVersion (fields joined by "|",
// empty fields kept as empty strings). Fields containing "|" can collide with
// other field splits; engines use ids without it.
func IdempotencyKey(runID, stepID, logicalAttemptID, eventType, planVersion string) string {
	sum := sha256.Sum256([]byte(strings.Join(
		[]string{runID, stepID, logicalAttemptID, eventType, planVersion}, "|")))
	return hex.EncodeToString(sum[:])
}
