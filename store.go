package pgdcb

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"time"

	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// Store is what a DCB event store offers, whatever keeps its events:
// *eventstore.Store on PostgreSQL and *memstore.Store in memory both satisfy
// it. Code that only appends, reads, projects and tails (decisions, command
// handlers, subscriptions) takes a Store, so its tests can run on memstore;
// package eventstore/conformance checks that an implementation keeps every
// guarantee of docs/CONCURRENCY.md. Each method means what the method of the
// same name on *eventstore.Store documents.
type Store interface {
	// Append appends events unconditionally (see eventstore.Store.Append).
	Append(ctx context.Context, events []Event) (AppendResult, error)
	// AppendIf appends events only if cond holds (see eventstore.Store.AppendIf).
	AppendIf(ctx context.Context, events []Event, cond appendif.Condition) (AppendResult, error)
	// Read streams the events matching q from one snapshot (see eventstore.Store.Read).
	Read(ctx context.Context, q query.Query, opts *ReadOptions) Events
	// ReadAll is Read into a slice (see eventstore.Store.ReadAll).
	ReadAll(ctx context.Context, q query.Query, opts *ReadOptions) ([]StoredEvent, cursor.Cursor, error)
	// ReadLast returns the last event matching q (see eventstore.Store.ReadLast).
	ReadLast(ctx context.Context, q query.Query) (*StoredEvent, cursor.Cursor, error)
	// Head returns a cursor at the end of the log (see eventstore.Store.Head).
	Head(ctx context.Context) (cursor.Cursor, error)
	// Project folds the projectors' events and returns the condition to
	// append with (see eventstore.Store.Project).
	Project(ctx context.Context, projectors ...Projector) (appendif.Condition, error)
	// ReadTail reads a page of a tailing read (see eventstore.Store.ReadTail).
	ReadTail(ctx context.Context, q query.Query, after cursor.Cursor, limit int) (TailBatch, error)
	// Listen calls wake whenever events may have been appended, until ctx
	// ends or listening fails; it then returns ctx's error or the failure.
	// It calls wake once as soon as it listens, since appends before that
	// were not reported. Wake-ups may be coalesced or spurious, and some may
	// be lost (a reader must still poll): they only make a tailing reader
	// faster. wake must not block. A caller retries a failed Listen with
	// backoff (subscriptions, projections and effect workers do).
	Listen(ctx context.Context, wake func()) error
}

// Events is the result of Read: iterate it once with All, then take Cursor.
type Events interface {
	// All yields the events in log order (or reversed with Backwards),
	// streaming them. Stop early by breaking out of the loop. Iterate once.
	All() iter.Seq2[StoredEvent, error]
	// Cursor is the decision cursor of the read, valid once All has run to
	// the end without error: an AppendIf with FailIf(sameQuery, &cursor)
	// fails if any matching event appears that this read did not see. ok is
	// false when the iteration did not finish. A read that ran to the end
	// (no Limit hit) has seen every visible event matching its query; a
	// forward read stopped by Limit has seen up to its last event; a
	// backward read's decision covers every visible event.
	Cursor() (c cursor.Cursor, ok bool)
}

// errReadTwice is the error of a second iteration of Events.All.
var errReadTwice = errors.New("pgdcb: read: Events.All iterated twice (read again instead)")

// NewEvents returns Events for implementers of Store: read runs when All is
// first iterated; it returns the matching events in the order All yields
// them and the decision cursor, or an error, which All yields alone. A
// second iteration yields an error, as the PostgreSQL store's does.
func NewEvents(read func() ([]StoredEvent, cursor.Cursor, error)) Events {
	return &readEvents{read: read}
}

type readEvents struct {
	read    func() ([]StoredEvent, cursor.Cursor, error)
	cursor  cursor.Cursor
	started bool
	done    bool
}

func (es *readEvents) All() iter.Seq2[StoredEvent, error] {
	return func(yield func(StoredEvent, error) bool) {
		if es.started {
			yield(StoredEvent{}, errReadTwice)
			return
		}
		es.started = true
		evs, c, err := es.read()
		if err != nil {
			yield(StoredEvent{}, err)
			return
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
		es.cursor, es.done = c, true
	}
}

func (es *readEvents) Cursor() (cursor.Cursor, bool) { return es.cursor, es.done }

// ReadOptions are Read's per-call options; nil means forward from the start,
// no limit.
type ReadOptions struct {
	// After: read only events After has not seen (see cursor.Cursor.Seen).
	After *cursor.Cursor
	// Limit caps the number of events; 0 means none.
	Limit int
	// Backwards reads newest first.
	Backwards bool
	// MetadataContains, when set, narrows the read to events whose metadata
	// contains this JSON object (jsonb @>), on top of the query. It is
	// written into the statement as a literal, so a partial index with the
	// same containment as its predicate can serve the read. A narrowed read
	// saw only what it returned: do not use its cursor as After for a
	// condition whose query matches events the filter left out.
	MetadataContains json.RawMessage
}

// TailBatch is one page of a tailing read.
type TailBatch struct {
	// Events matching the query after the cursor, in log order.
	Events []StoredEvent
	// Cursor to continue from. It always covers the batch it comes with, and
	// it always names an event that exists (or the start of the log): the last
	// event delivered when the limit was reached, else the last event of the
	// whole log below the horizon (everything matching before it was
	// delivered), else the cursor the read started from. It never points past
	// the newest event, so no transaction id a crash can hand out again sorts
	// at or before it. It carries no snapshot and is safe as an AppendIf After
	// by plain log order.
	Cursor cursor.Cursor
	// Horizon is the oldest transaction id that was running when the page was
	// read and is not proven to run in another database of the cluster (the
	// read's snapshot xmax when there is none): no event at or above it was
	// delivered. See docs/CONCURRENCY.md, "The tailing horizon".
	Horizon uint64
	// HorizonHolder is the transaction at the horizon, when it was still
	// running as the page was read: the one a reader waits for when
	// committed events sit at or above the horizon. Zero when none.
	HorizonHolder HorizonHolder
	// Head is the last event of the whole log in log order visible when the
	// page was read (whatever the limit and the query), for lag metrics.
	Head cursor.Cursor
}

// HorizonHolder names the transaction at a tailing read's horizon.
type HorizonHolder struct {
	// PID of its backend; 0 when not known (a prepared transaction, or one
	// that ended just after the read's snapshot).
	PID int
	// Database it runs in; "" when not known.
	Database string
}

// AppendResult says where an append's events landed.
type AppendResult struct {
	// TransactionID is the appending transaction's xid8.
	TransactionID uint64
	// Positions of the events, in batch order.
	Positions []int64
	// OccurredAt is the events' recorded time (StoredEvent.OccurredAt);
	// zero when the store did not say.
	OccurredAt time.Time
}

// Cursor is the log point of the append's last event: a tailing reader whose
// cursor is at or after it has delivered the append's events and every event
// before them. It names that event by its recorded time too
// (cursor.Cursor.EventTime). Pass it to projection.Runner.WaitFor or
// subscription.Subscription.WaitFor to read your own writes. It carries no
// snapshot (it is not a decision cursor).
func (r AppendResult) Cursor() cursor.Cursor {
	c := cursor.Cursor{TransactionID: r.TransactionID}
	if !r.OccurredAt.IsZero() {
		c.EventTime = r.OccurredAt.UnixMicro()
	}
	if n := len(r.Positions); n > 0 {
		c.Position = r.Positions[n-1]
	}
	return c
}
