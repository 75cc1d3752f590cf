package effects

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Event types of an effect's lifecycle.
const (
	typeRequested = "effect_requested"
	typeStarted   = "effect_started"
	typeCompleted = "effect_completed"
	typeFailed    = "effect_failed"
)

// Tag keys. Every effect event carries tagID and tagSession; effect_requested
// also carries tagDedupe.
const (
	tagID      = "effect_id"
	tagSession = "effect_session"
	tagDedupe  = "effect_dedupe"
)

// State is where an effect is in its lifecycle.
type State string

// States. Pending covers an effect waiting for its first attempt, for its
// session's previous effect, or for its retry after a failed attempt.
const (
	StatePending   State = "pending"
	StateExecuting State = "executing"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
)

// Handler executes one effect. Its context ends when the worker stops or
// loses the claim's lease (context.Cause then tells which). An error fails
// the attempt (retried until Config.MaxAttempts).
type Handler func(ctx context.Context, e Effect) error

// Effect is an effect's state: the fold of its events.
type Effect struct {
	ID        string
	Type      string
	Session   string
	DedupeKey string
	Payload   json.RawMessage
	State     State
	// Attempts is the number of claims so far (the current attempt while
	// executing).
	Attempts int
	// Worker holds (or last held) the effect; LeaseUntil is its lease's end.
	Worker     string
	LeaseUntil time.Time
	// RetryAt: a pending effect with a failed attempt is not claimed before.
	RetryAt time.Time
	// LastError is the error of the last failed attempt.
	LastError     string
	RequestedAt   time.Time
	LastAttemptAt time.Time
	FinishedAt    time.Time
	// Requested is the log point of effect_requested: a session's order.
	Requested cursor.Cursor
}

// Finished reports whether the effect is completed or failed for good.
func (e *Effect) Finished() bool { return e.State == StateCompleted || e.State == StateFailed }

type requestedData struct {
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	DedupeKey string          `json:"dedupe_key"`
	Session   string          `json:"session"`
}

type startedData struct {
	Attempt    int       `json:"attempt"`
	Worker     string    `json:"worker"`
	LeaseUntil time.Time `json:"lease_until"`
}

type completedData struct {
	Attempt int    `json:"attempt"`
	Worker  string `json:"worker"`
}

type failedData struct {
	Attempt int       `json:"attempt"`
	Worker  string    `json:"worker"`
	Error   string    `json:"error"`
	Final   bool      `json:"final"`
	RetryAt time.Time `json:"retry_at,omitzero"`
}

var allTypes = []string{typeRequested, typeStarted, typeLeaseExtended, typeCompleted, typeFailed}

// allQuery matches every effect event.
func allQuery() query.Query { return query.Tagged(allTypes) }

func idTag(id string) tags.Tag           { return tags.Must(tagID, id) }
func sessionTag(session string) tags.Tag { return tags.Must(tagSession, session) }

func effectQuery(id string) query.Query {
	return query.New(query.Item{Types: allTypes, Tags: mustSet(idTag(id))})
}

func sessionQuery(session string) query.Query {
	return query.New(query.Item{Types: allTypes, Tags: mustSet(sessionTag(session))})
}

func mustSet(ts ...tags.Tag) tags.Set {
	s, err := tags.NewSet(ts...)
	if err != nil {
		panic(err)
	}
	return s
}

func tagValue(ev pgdcb.StoredEvent, key string) string {
	v, _ := ev.Tags.Get(key)
	return v
}

// newEffect builds an effect from its effect_requested event.
func newEffect(ev pgdcb.StoredEvent) *Effect {
	var d requestedData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil
	}
	return &Effect{
		ID: tagValue(ev, tagID), Type: d.Type, Session: d.Session, DedupeKey: d.DedupeKey,
		Payload: d.Payload, State: StatePending, RequestedAt: ev.OccurredAt,
		Requested: cursor.Cursor{TransactionID: ev.TransactionID, Position: ev.Position},
	}
}

// apply folds one later event of the effect (not effect_requested).
// Malformed events are ignored.
func (e *Effect) apply(ev pgdcb.StoredEvent) {
	switch ev.Type {
	case typeStarted:
		var d startedData
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		e.State, e.Attempts, e.Worker, e.LeaseUntil = StateExecuting, d.Attempt, d.Worker, d.LeaseUntil
		e.LastAttemptAt = ev.OccurredAt
	case typeLeaseExtended:
		var d leaseExtendedData
		if json.Unmarshal(ev.Data, &d) != nil || e.State != StateExecuting || d.Attempt != e.Attempts || d.Worker != e.Worker {
			return
		}
		e.LeaseUntil = d.LeaseUntil
	case typeCompleted:
		e.State, e.FinishedAt = StateCompleted, ev.OccurredAt
	case typeFailed:
		var d failedData
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		e.LastError, e.RetryAt = d.Error, d.RetryAt
		e.State = StatePending
		if d.Final {
			e.State, e.FinishedAt = StateFailed, ev.OccurredAt
		}
	}
}

// effects is a fold of effect events: effects by id, and each session's
// effects in request order.
type effects struct {
	byID    map[string]*Effect
	session map[string][]*Effect
	// dropFinished removes effects once finished (a worker's index keeps
	// only unfinished ones).
	dropFinished bool
}

func newEffects() *effects {
	return &effects{byID: map[string]*Effect{}, session: map[string][]*Effect{}}
}

func (f *effects) apply(ev pgdcb.StoredEvent) {
	if ev.Type == typeRequested {
		e := newEffect(ev)
		if e == nil || e.ID == "" {
			return
		}
		if _, dup := f.byID[e.ID]; dup {
			return
		}
		f.byID[e.ID] = e
		f.session[e.Session] = append(f.session[e.Session], e)
		return
	}
	e := f.byID[tagValue(ev, tagID)]
	if e == nil {
		return
	}
	e.apply(ev)
	if f.dropFinished && e.Finished() {
		delete(f.byID, e.ID)
		list := f.session[e.Session]
		for i, x := range list {
			if x == e {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(f.session, e.Session)
		} else {
			f.session[e.Session] = list
		}
	}
}

// head returns the session's first unfinished effect, or nil.
func (f *effects) head(session string) *Effect {
	for _, e := range f.session[session] {
		if !e.Finished() {
			return e
		}
	}
	return nil
}

func foldEffects(f *effects, ev pgdcb.StoredEvent) *effects {
	f.apply(ev)
	return f
}

// reset replaces what f knows of a session with its unfinished effects in
// fresh (a fold of the session's events): a worker's index then forgets
// effects whose events retention removed before its tail saw them finish.
func (f *effects) reset(session string, fresh *effects) {
	for _, e := range f.session[session] {
		delete(f.byID, e.ID)
	}
	delete(f.session, session)
	for _, e := range fresh.session[session] {
		if e.Finished() {
			continue
		}
		c := *e
		f.byID[c.ID] = &c
		f.session[session] = append(f.session[session], &c)
	}
}
