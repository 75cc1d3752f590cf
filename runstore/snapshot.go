package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Run statuses of the default reducer.
const (
	StatusPending   = "PENDING"
	StatusRunning   = "RUNNING"
	StatusCompleted = "COMPLETED"
	StatusFailed    = "FAILED"
	StatusCancelled = "CANCELLED"
)

// RunSnapshot is a run's state derived from its events. It is a pure function
// of the events (no projection time, no version), so a materialised snapshot
// and an on-demand one are equal once the projector has caught up.
type RunSnapshot struct {
	RunID string `json:"runId"`
	// Status is PENDING until RunStarted (default reducer).
	Status string `json:"status"`
	// LastEventSeq is the runSeq of the last event applied (set by the store).
	LastEventSeq int64 `json:"lastEventSeq"`
	// EventCount is how many events were applied (set by the store).
	EventCount int64 `json:"eventCount"`
	// StartedAt / CompletedAt are the emittedAt of RunStarted and of the
	// terminal event (default reducer).
	StartedAt   string `json:"startedAt,omitempty"`
	CompletedAt string `json:"completedAt,omitempty"`
	// Steps by stepId (default reducer).
	Steps map[string]StepState `json:"steps,omitempty"`
	// Data is free for custom reducers (JSON).
	Data json.RawMessage `json:"data,omitempty"`
}

// StepState is one step in a RunSnapshot.
type StepState struct {
	// Status: RUNNING, COMPLETED or FAILED.
	Status string `json:"status"`
	// Attempts counts StepStarted events.
	Attempts int `json:"attempts"`
	// LogicalAttemptID of the last step event.
	LogicalAttemptID string `json:"logicalAttemptId,omitempty"`
	// LastEventSeq is the runSeq of the last step event.
	LastEventSeq int64 `json:"lastEventSeq"`
	// Result is the eventData of the StepCompleted or StepFailed event.
	Result json.RawMessage `json:"result,omitempty"`
}

// Reducer applies one event to a snapshot in place. It is called in runSeq
// order, once per event, starting from NewSnapshot(runID); it must be
// deterministic (it runs both in the projector and in ProjectSnapshot) and
// must keep the snapshot JSON-serialisable (it is stored as jsonb and the
// projector resumes from the stored form). The store sets LastEventSeq and
// EventCount after it.
type Reducer func(s *RunSnapshot, ev CanonicalEngineEvent)

// NewSnapshot is the state of a run before its first event.
func NewSnapshot(runID string) *RunSnapshot {
	return &RunSnapshot{RunID: runID, Status: StatusPending}
}

// DefaultReducer: RunStarted → RUNNING, StepStarted/StepCompleted/StepFailed
// update the step map, RunCompleted → COMPLETED, RunFailed → FAILED,
// RunCancelled → CANCELLED; other event types are ignored.
func DefaultReducer(s *RunSnapshot, ev CanonicalEngineEvent) {
	switch ev.EventType {
	case "RunStarted":
		s.Status = StatusRunning
		if s.StartedAt == "" {
			s.StartedAt = ev.EmittedAt
		}
	case "RunCompleted", "RunFailed", "RunCancelled":
		s.Status = map[string]string{
			"RunCompleted": StatusCompleted, "RunFailed": StatusFailed, "RunCancelled": StatusCancelled,
		}[ev.EventType]
		s.CompletedAt = ev.EmittedAt
	case "StepStarted", "StepCompleted", "StepFailed":
		if ev.StepID == "" {
			return
		}
		if s.Steps == nil {
			s.Steps = make(map[string]StepState)
		}
		st := s.Steps[ev.StepID]
		switch ev.EventType {
		case "StepStarted":
			st.Status = StatusRunning
			st.Attempts++
			st.Result = nil
		case "StepCompleted":
			st.Status = StatusCompleted
			st.Result = ev.EventData
		case "StepFailed":
			st.Status = StatusFailed
			st.Result = ev.EventData
		}
		st.LogicalAttemptID = ev.LogicalAttemptID
		st.LastEventSeq = ev.RunSeq
		s.Steps[ev.StepID] = st
	}
}

// apply runs the reducer and the store's bookkeeping; events at or before the
// snapshot's LastEventSeq are skipped (already applied).
func (s *Store) apply(snap *RunSnapshot, ev CanonicalEngineEvent) bool {
	if ev.RunSeq <= snap.LastEventSeq {
		return false
	}
	s.cfg.Reducer(snap, ev)
	snap.LastEventSeq = ev.RunSeq
	snap.EventCount++
	return true
}

// GetSnapshot implements StateStore: the run_snapshots row, nil when the run
// is unknown to the projector.
func (s *Store) GetSnapshot(ctx context.Context, runID string) (*RunSnapshot, error) {
	if err := validateRunID(runID); err != nil {
		return nil, err
	}
	var data []byte
	err := s.es.Pool().QueryRow(ctx, s.sql.getSnapshot, runID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runstore: get snapshot: %w", err)
	}
	var snap RunSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%w: snapshot of %q: %v", ErrCorruptEvent, runID, err)
	}
	return &snap, nil
}

// ProjectSnapshot implements StateStore: it replays the run's events (pages of
// MaxFetchLimit) through the reducer.
func (s *Store) ProjectSnapshot(ctx context.Context, runID string) (*RunSnapshot, error) {
	if err := validateRunID(runID); err != nil {
		return nil, err
	}
	snap := NewSnapshot(runID)
	for {
		evs, err := s.FetchEvents(ctx, runID, &FetchOptions{AfterSeq: snap.LastEventSeq, Limit: s.cfg.MaxFetchLimit})
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			s.apply(snap, ev)
		}
		if len(evs) < s.cfg.MaxFetchLimit {
			return snap, nil
		}
	}
}
