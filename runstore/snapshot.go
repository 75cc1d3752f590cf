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

// Run statuses of the default reducer (RunSnapshot.Status).
const (
	statusPending   = "PENDING"
	statusRunning   = "RUNNING"
	statusCompleted = "COMPLETED"
	statusFailed    = "FAILED"
	statusCancelled = "CANCELLED"
)

// RunSnapshot is a run's state derived from its events. It is a pure function
// of the events (no projection time, no version), so a materialised snapshot
// and an on-demand one are equal once the projector has caught up.
type RunSnapshot struct {
	RunID string `json:"runId"`
	// Status is PENDING until RunStarted, then RUNNING, and COMPLETED,
	// FAILED or CANCELLED after RunCompleted, RunFailed or RunCancelled
	// (the default reducer).
	Status string `json:"status"`
	// LastEventSeq is the runSeq of the last event applied (set by the store).
	LastEventSeq int64 `json:"lastEventSeq"`
	// EventCount is how many events were applied (set by the store).
	EventCount int64 `json:"eventCount"`
	// StartedAt / CompletedAt are the emittedAt of RunStarted and of the
	// terminal event (default reducer).
	StartedAt   string `json:"startedAt,omitempty"`
	CompletedAt string `json:"completedAt,omitempty"`
	// Steps by stepId (default reducer): each step's status (RUNNING,
	// COMPLETED or FAILED), attempts (StepStarted events), the
	// logicalAttemptId and runSeq of its last event, and result (the
	// eventData of StepCompleted or StepFailed).
	Steps map[string]stepState `json:"steps,omitempty"`
	// Data is free for custom reducers (JSON).
	Data json.RawMessage `json:"data,omitempty"`
	// Gaps are the runSeqs below LastEventSeq (each From..To, both
	// included) that no event held when the snapshot was replayed (none on
	// a backend whose runSeqs are contiguous, as this one's): an event
	// arriving later in one of them is a gap filled later, which marks the
	// run STALE (contract §4.2).
	Gaps []seqRange `json:"gaps,omitempty"`
}

// seqRange is the runSeqs From..To, both included.
type seqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// stepState is one step in a RunSnapshot.
type stepState struct {
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

// reducer is Config.Reducer's type.
type reducer = func(s *RunSnapshot, ev CanonicalEngineEvent)

// newSnapshot is the state of a run before its first event.
func newSnapshot(runID string) *RunSnapshot {
	return &RunSnapshot{RunID: runID, Status: statusPending}
}

// defaultReducer: RunStarted → RUNNING, StepStarted/StepCompleted/StepFailed
// update the step map, RunCompleted → COMPLETED, RunFailed → FAILED,
// RunCancelled → CANCELLED; other event types are ignored.
func defaultReducer(s *RunSnapshot, ev CanonicalEngineEvent) {
	switch ev.EventType {
	case "RunStarted":
		s.Status = statusRunning
		if s.StartedAt == "" {
			s.StartedAt = ev.EmittedAt
		}
	case "RunCompleted", "RunFailed", "RunCancelled":
		s.Status = map[string]string{
			"RunCompleted": statusCompleted, "RunFailed": statusFailed, "RunCancelled": statusCancelled,
		}[ev.EventType]
		s.CompletedAt = ev.EmittedAt
	case "StepStarted", "StepCompleted", "StepFailed":
		if ev.StepID == "" {
			return
		}
		if s.Steps == nil {
			s.Steps = make(map[string]stepState)
		}
		st := s.Steps[ev.StepID]
		switch ev.EventType {
		case "StepStarted":
			st.Status = statusRunning
			st.Attempts++
			st.Result = nil
		case "StepCompleted":
			st.Status = statusCompleted
			st.Result = ev.EventData
		case "StepFailed":
			st.Status = statusFailed
			st.Result = ev.EventData
		}
		st.LogicalAttemptID = ev.LogicalAttemptID
		st.LastEventSeq = ev.RunSeq
		s.Steps[ev.StepID] = st
	}
}

// observation is how an event stands against a snapshot (observe).
type observation int

// Observations. observedNext is the only one that applies the event;
// observedGap and observedFill are the contract's non-contiguous
// observations (§4.2): mark the run STALE and rebuild its snapshot from its
// events (fold, in runSeq order).
const (
	// observedNext: the event's runSeq is LastEventSeq+1; it was applied.
	observedNext observation = iota + 1
	// observedHeld: the snapshot already holds the event (a runSeq at or
	// below LastEventSeq, not in Gaps); nothing changed.
	observedHeld
	// observedGap: the runSeq is beyond LastEventSeq+1; not applied.
	observedGap
	// observedFill: the runSeq is in Gaps (a gap filled later); not applied.
	observedFill
)

func (o observation) String() string {
	switch o {
	case observedNext:
		return "next"
	case observedHeld:
		return "held"
	case observedGap:
		return "gap"
	case observedFill:
		return "fill"
	}
	return "observation(" + strconv.Itoa(int(o)) + ")"
}

// observe is the incremental projection's bookkeeping:
// it applies ev with r (nil: defaultReducer) and sets LastEventSeq and
// EventCount when ev extends the snapshot contiguously, and otherwise says
// why not, changing nothing.
func (snap *RunSnapshot) observe(ev CanonicalEngineEvent, r reducer) observation {
	switch {
	case ev.RunSeq == snap.LastEventSeq+1:
		snap.reduce(ev, r)
		return observedNext
	case ev.RunSeq > snap.LastEventSeq:
		return observedGap
	case snap.inGap(ev.RunSeq):
		return observedFill
	}
	return observedHeld
}

// fold is the replay's bookkeeping: called with a run's
// events in runSeq order from newSnapshot (ProjectSnapshot, a resync), it
// applies each event after LastEventSeq with r (nil: defaultReducer), records
// the runSeqs it skipped over in Gaps, and reports whether it applied ev.
func (snap *RunSnapshot) fold(ev CanonicalEngineEvent, r reducer) bool {
	if ev.RunSeq <= snap.LastEventSeq {
		return false
	}
	if ev.RunSeq > snap.LastEventSeq+1 {
		snap.Gaps = append(snap.Gaps, seqRange{From: snap.LastEventSeq + 1, To: ev.RunSeq - 1})
	}
	snap.reduce(ev, r)
	return true
}

func (snap *RunSnapshot) reduce(ev CanonicalEngineEvent, r reducer) {
	if r == nil {
		r = defaultReducer
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
	if err := validateRunID(runID); err != nil {
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
// MaxFetchLimit) through Config.Reducer, recording skipped runSeqs in Gaps.
func (s *Store) ProjectSnapshot(ctx context.Context, runID string) (*RunSnapshot, error) {
	if err := validateRunID(runID); err != nil {
		return nil, err
	}
	return s.replay(ctx, s.es.Pool(), runID)
}

// replay folds every event of the run, in runSeq order, into a new snapshot.
func (s *Store) replay(ctx context.Context, db querier, runID string) (*RunSnapshot, error) {
	snap := newSnapshot(runID)
	for {
		evs, err := s.fetch(ctx, db, runID, snap.LastEventSeq, s.cfg.MaxFetchLimit)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			snap.fold(ev, s.cfg.Reducer)
		}
		if len(evs) < s.cfg.MaxFetchLimit {
			return snap, nil
		}
	}
}
