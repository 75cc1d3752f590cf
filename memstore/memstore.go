// Package memstore is an in-memory DCB event store with the semantics of the
// PostgreSQL store (package eventstore): the same operations
// (pgdcb.Store), the same conditions, cursors, idempotency, typed
// errors, input validation and limits. Use it to test command handlers,
// deciders and subscriptions without a server; package
// eventstore/conformance checks that both stores behave alike.
//
// Make one with memstore.New(nil) and use it where a pgdcb.Store
// is expected.
//
// A Store is safe for concurrent use. Appends are serialised by a mutex, so
// a condition is checked exactly: of racing appends on one boundary exactly
// one commits. Every append is one transaction: it gets the next transaction
// id, and its events the next positions, so cursors (package cursor) mean
// what they mean on PostgreSQL. Nothing is ever in flight, so a read's
// snapshot has no in-progress transactions and the tailing horizon is the
// next transaction id: tailing readers see every event at once.
//
// As on PostgreSQL, the first event of an append that has no id gets one
// (a UUIDv7; see pgdcb.Event.ID), the others none.
//
// Event data and metadata are stored as PostgreSQL's jsonb gives them back
// (keys sorted, shorter first; the last of duplicate keys; numbers in
// numeric's form, 1e2 as 100; jsonb's spacing), so reads return the same
// bytes on both stores.
//
// Nothing is persisted: the log lives as long as the Store.
package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/pgjson"
	"github.com/pgdcb/pgdcb/internal/seal"
	"github.com/pgdcb/pgdcb/internal/storekit"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// Config configures a Store. nil or the zero value means every default; in
// every field 0 means the default and New refuses negative values with a
// *pgdcb.InvalidArgumentError. The limits mean what they mean in
// eventstore.Config, with the same defaults.
type Config struct {
	// MaxBatchSize is the most events one append may carry. 0: the default,
	// 1000.
	MaxBatchSize int
	// MaxEventBytes is the most bytes one event may take (see
	// pgdcb.Event.Size). 0: the default, eventstore.DefaultMaxEventBytes;
	// at most 256 MiB.
	MaxEventBytes int
	// MaxBatchBytes is the most bytes one append may carry. 0: the default,
	// 16 MiB (or MaxEventBytes when larger); at most
	// 256 MiB.
	MaxBatchBytes int
	// Now stamps appended events (StoredEvent.OccurredAt). Default time.Now.
	Now func() time.Time
	// Upcasters brings old events to the current shape on every read, as
	// eventstore.Config.Upcasters does. Default nil: read as stored.
	Upcasters *upcast.Registry
}

// Store is an in-memory event store. Create it with New.
type Store struct {
	limits    storekit.Limits // the limits, defaults filled in
	now       func() time.Time
	upcasters *upcast.Registry

	mu      sync.RWMutex
	events  []pgdcb.StoredEvent   // in log order
	ids     map[[16]byte]struct{} // stored event ids
	byTag   map[string][]int      // tag → indices in events, ascending
	lastTx  uint64                // the last transaction id handed out
	lastPos int64                 // the last position handed out
	keys    map[string]seal.Key   // subject → data key (erase.go)
	keyByID map[string][]byte     // key id → data key

	lmu       sync.Mutex
	listeners map[chan struct{}]struct{}
}

var _ pgdcb.Store = (*Store)(nil)

// New returns an empty store.
func New(cfg *Config) (*Store, error) {
	l, err := cfg.validate()
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: memstore.New: %w", err)
	}
	c := cfg.withDefaults(l)
	return &Store{limits: c.limits(), now: c.Now, upcasters: c.Upcasters, ids: make(map[[16]byte]struct{}), byTag: make(map[string][]int),
		keys: make(map[string]seal.Key), keyByID: make(map[string][]byte),
		listeners: make(map[chan struct{}]struct{})}, nil
}

// limits is c's limits (none for nil).
func (c *Config) limits() storekit.Limits {
	if c == nil {
		return storekit.Limits{}
	}
	return storekit.Limits{MaxBatchSize: c.MaxBatchSize, MaxEventBytes: c.MaxEventBytes, MaxBatchBytes: c.MaxBatchBytes}
}

// validate refuses what eventstore.New refuses in the same fields, through
// storekit.ResolveLimits, and returns the limits that resolved (defaults
// filled in) for withDefaults: the limits are resolved once. New calls it
// first, then withDefaults.
func (c *Config) validate() (limits storekit.Limits, err error) {
	return storekit.ResolveLimits(c.limits())
}

// withDefaults returns a copy of c (nil: the zero Config) with every zero
// field set to its default: the limits as validate resolved them (l), so
// eventstore.Config's defaults.
func (c *Config) withDefaults(l storekit.Limits) Config {
	var o Config
	if c != nil {
		o = *c
	}
	o.MaxBatchSize, o.MaxEventBytes, o.MaxBatchBytes = l.MaxBatchSize, l.MaxEventBytes, l.MaxBatchBytes
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// MustNew is New that panics on error; for tests and examples.
func MustNew(cfg *Config) *Store {
	s, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}

// Append appends events unconditionally, as one transaction (see
// eventstore.Store.Append). An event whose ID is already stored fails the
// append with an *appendif.IdempotentError naming the id.
func (s *Store) Append(ctx context.Context, events []pgdcb.Event) (pgdcb.AppendResult, error) {
	return s.append(ctx, events, nil)
}

// AppendIf appends events only if cond holds (see eventstore.Store.AppendIf):
// it fails with an *appendif.IdempotentError when the idempotency query
// matches any event, else with an *appendif.ConditionFailedError when an
// event matching FailIfEventsMatch exists that cond.After has not seen.
// Either way nothing is appended.
func (s *Store) AppendIf(ctx context.Context, events []pgdcb.Event, cond appendif.Condition) (pgdcb.AppendResult, error) {
	if err := cond.Validate(); err != nil {
		return pgdcb.AppendResult{}, err
	}
	cond = storekit.ExpandCondition(s.upcasters, cond)
	return s.append(ctx, events, &cond)
}

func (s *Store) append(ctx context.Context, events []pgdcb.Event, cond *appendif.Condition) (pgdcb.AppendResult, error) {
	events, err := storekit.Stamp(s.upcasters, events)
	if err != nil {
		return pgdcb.AppendResult{}, err
	}
	if err := storekit.ValidateEvents(s.limits, events); err != nil {
		return pgdcb.AppendResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return pgdcb.AppendResult{}, errfmt.Errorf("pgdcb: append: %w", err)
	}
	subjects, err := storekit.MarkedSubjects(events)
	if err != nil {
		return pgdcb.AppendResult{}, err
	}
	s.mu.Lock()
	if subjects != nil {
		events, err = s.sealLocked(events, subjects)
	}
	var res pgdcb.AppendResult
	if err == nil {
		res, err = s.appendLocked(events, cond)
	}
	s.mu.Unlock()
	if err == nil {
		s.notify()
	}
	return res, err
}

// appendLocked checks, in the PostgreSQL store's order, the idempotency
// query, the condition, then the event ids, and appends.
func (s *Store) appendLocked(events []pgdcb.Event, cond *appendif.Condition) (pgdcb.AppendResult, error) {
	if cond != nil {
		if !cond.Idempotency.IsEmpty() {
			if ev, ok := s.first(cond.Idempotency, nil); ok {
				return pgdcb.AppendResult{}, &appendif.IdempotentError{Query: cond.Idempotency, ExistingPosition: ev.Position}
			}
		}
		if !cond.FailIfEventsMatch.IsEmpty() {
			if ev, ok := s.first(cond.FailIfEventsMatch, cond.After); ok {
				return pgdcb.AppendResult{}, &appendif.ConditionFailedError{Query: cond.FailIfEventsMatch, After: cond.After, ConflictPosition: ev.Position}
			}
		}
	}
	for _, e := range events {
		if e.ID == [16]byte{} {
			continue
		}
		if _, dup := s.ids[e.ID]; dup {
			return pgdcb.AppendResult{}, &appendif.IdempotentError{EventID: e.ID.String()}
		}
	}
	s.lastTx++
	at := s.now()
	res := pgdcb.AppendResult{TransactionID: s.lastTx, Positions: make([]int64, len(events))}
	for i, e := range events {
		s.lastPos++
		// Stored as PostgreSQL's jsonb gives it back (keys sorted, numbers
		// in numeric's form, jsonb's spacing), so that reads are the same
		// bytes on both stores.
		e.Data = jsonbForm(e.Data)
		e.Metadata = jsonbForm(e.Metadata)
		if i == 0 && e.ID == uuid.Nil {
			e.ID = callID()
		}
		if e.ID != [16]byte{} {
			s.ids[e.ID] = struct{}{}
		}
		for _, tg := range e.Tags.Strings() {
			s.byTag[tg] = append(s.byTag[tg], len(s.events))
		}
		s.events = append(s.events, pgdcb.StoredEvent{Event: e, Position: s.lastPos, TransactionID: s.lastTx, OccurredAt: at})
		res.Positions[i] = s.lastPos
	}
	return res, nil
}

// callID is the id the PostgreSQL store gives the first event of an append
// that has none (pgdcb.Event.ID): a fresh UUIDv7.
func callID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

// first returns the first event in log order matching q that after has not
// seen (nil after: any).
func (s *Store) first(q query.Query, after *cursor.Cursor) (found pgdcb.StoredEvent, ok bool) {
	s.scan(q, after, false, func(e pgdcb.StoredEvent) bool {
		found, ok = e, true
		return false
	})
	return found, ok
}

// notSeen is the PostgreSQL store's "not seen by c": the event sorts after c,
// or its transaction was in progress at c's snapshot.
func notSeen(c cursor.Cursor, ev pgdcb.StoredEvent) bool {
	if cursor.Compare(ev.TransactionID, ev.Position, c.TransactionID, c.Position) > 0 {
		return true
	}
	if c.Snapshot == nil {
		return false
	}
	_, inProgress := slices.BinarySearch(c.Snapshot.Xip, ev.TransactionID)
	return inProgress
}

// headLocked returns the last event's point and the snapshot of a read now.
func (s *Store) headLocked() cursor.Cursor {
	var c cursor.Cursor
	if n := len(s.events); n > 0 {
		c.TransactionID, c.Position = s.events[n-1].TransactionID, s.events[n-1].Position
	}
	next := s.lastTx + 1
	c.Snapshot = &cursor.Snapshot{Xmin: next, Xmax: next}
	return c
}

// clone returns ev with its own copies of its JSON, so callers cannot change
// the log.
func clone(ev pgdcb.StoredEvent) pgdcb.StoredEvent {
	ev.Data = slices.Clone(ev.Data)
	ev.Metadata = slices.Clone(ev.Metadata)
	return ev
}

// invalidLimit is the error for a negative limit.
func invalidLimit(name string, limit int) error {
	return &pgdcb.InvalidArgumentError{Name: name,
		Reason: fmt.Sprintf("must not be negative (got %d; 0 means no limit)", limit)}
}

// jsonbForm returns a copy of b in jsonb's output form (nil stays nil). b
// was validated by the append; should it not normalise, it is kept as is.
func jsonbForm(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	n, err := pgjson.Normalize(b)
	if err != nil {
		return slices.Clone(b)
	}
	return n
}
