package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/pgdcb/pgdcb/internal/errfmt"
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
	// Gaps are the runSeqs below LastEventSeq that no event held when the
	// snapshot was folded (set by Fold; none on a backend whose runSeqs are
	// contiguous, as this one's): an event arriving later in one of them is
	// a gap filled later, and Observe reports it (contract §4.2).
	Gaps []SeqRange `json:"gaps,omitempty"`
}

// SeqRange is the runSeqs From..To, both included.
type SeqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
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

// Observation is how an event stands against a snapshot (Observe).
type Observation int

// Observations. ObservedNext is the only one that applies the event;
// ObservedGap and ObservedFill are the contract's non-contiguous
// observations (§4.2): mark the run STALE and rebuild its snapshot from its
// events (Fold, in runSeq order).
const (
	// ObservedNext: the event's runSeq is LastEventSeq+1; it was applied.
	ObservedNext Observation = iota + 1
	// ObservedHeld: the snapshot already holds the event (a runSeq at or
	// below LastEventSeq, not in Gaps); nothing changed.
	ObservedHeld
	// ObservedGap: the runSeq is beyond LastEventSeq+1; not applied.
	ObservedGap
	// ObservedFill: the runSeq is in Gaps (a gap filled later); not applied.
	ObservedFill
)

func (o Observation) String() string {
	switch o {
	case ObservedNext:
		return "next"
	case ObservedHeld:
		return "held"
	case ObservedGap:
		return "gap"
	case ObservedFill:
		return "fill"
	}
	return "Observation(" + strconv.Itoa(int(o)) + ")"
}

// Observe is the incremental projection's bookkeeping, for every backend:
// it applies ev with r (nil: DefaultReducer) and sets LastEventSeq and
// EventCount when ev extends the snapshot contiguously, and otherwise says
// why not, changing nothing.
func (snap *RunSnapshot) Observe(ev CanonicalEngineEvent, r Reducer) Observation {
	switch {
	case ev.RunSeq == snap.LastEventSeq+1:
		snap.reduce(ev, r)
		return ObservedNext
	case ev.RunSeq > snap.LastEventSeq:
		return ObservedGap
	case snap.inGap(ev.RunSeq):
		return ObservedFill
	}
	return ObservedHeld
}

// Fold is the replay's bookkeeping, for every backend: called with a run's
// events in runSeq order from NewSnapshot (ProjectSnapshot, a resync), it
// applies each event after LastEventSeq with r (nil: DefaultReducer), records
// the runSeqs it skipped over in Gaps, and reports whether it applied ev.
func (snap *RunSnapshot) Fold(ev CanonicalEngineEvent, r Reducer) bool {
	if ev.RunSeq <= snap.LastEventSeq {
		return false
	}
	if ev.RunSeq > snap.LastEventSeq+1 {
		snap.Gaps = append(snap.Gaps, SeqRange{From: snap.LastEventSeq + 1, To: ev.RunSeq - 1})
	}
	snap.reduce(ev, r)
	return true
}

func (snap *RunSnapshot) reduce(ev CanonicalEngineEvent, r Reducer) {
	if r == nil {
		r = DefaultReducer
	}
	r(snap, ev)
	snap.LastEventSeq = ev.RunSeq
	snap.EventCount++
}

func (snap *RunSnapshot) inGap(seq int64) bool {
	for _, g := range snap.Gaps {
		if seq >= g.From && seq <= g.To {
			return true
		}
	}
	return false
}

// GetSnapshot implements StateStore: the run_snapshots row, nil when the run
// is unknown to the projector.
func (s *Store) GetSnapshot(ctx context.Context, runID string) (*RunSnapshot, error) {
	if err := ValidateRunID(runID); err != nil {
		return nil, err
	}
	var data []byte
	err := s.es.Pool().QueryRow(ctx, s.sql.getSnapshot, runID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: runstore: get snapshot: %w", err)
	}
	var snap RunSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%w: snapshot of %q: %v", ErrCorruptEvent, runID, err)
	}
	return &snap, nil
}

// ProjectSnapshot implements StateStore: it replays the run's events (pages of
// MaxFetchLimit) through the reducer (RunSnapshot.Fold).
func (s *Store) ProjectSnapshot(ctx context.Context, runID string) (*RunSnapshot, error) {
	if err := ValidateRunID(runID); err != nil {
		return nil, err
	}
	return s.replay(ctx, s.es.Pool(), runID)
}

// replay folds every event of the run, in runSeq order, into a new snapshot.
func (s *Store) replay(ctx context.Context, db querier, runID string) (*RunSnapshot, error) {
	snap := NewSnapshot(runID)
	for {
		evs, err := s.fetch(ctx, db, runID, snap.LastEventSeq, s.cfg.MaxFetchLimit)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			snap.Fold(ev, s.cfg.Reducer)
		}
		if len(evs) < s.cfg.MaxFetchLimit {
			return snap, nil
		}
	}
}
