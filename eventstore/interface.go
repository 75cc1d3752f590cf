package eventstore

import (
	"context"
	"errors"
	"iter"

	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// Interface is what a DCB event store offers whatever keeps its events: the
// operations of *Store without the …Tx forms (which are PostgreSQL's). Code
// that only appends, reads, projects and tails (command handlers,
// subscriptions) takes an Interface, so that its tests can run on the
// in-memory store of package memstore; package eventstore/conformance checks
// that an implementation keeps every guarantee of docs/CONCURRENCY.md.
//
// Every method has the meaning documented on *Store's method of the same name.
// It is named as sort.Interface is: what a type must offer to be used as an
// event store (see the package documentation, "Implementing Interface").
type Interface interface {
	// Append appends events unconditionally (see Store.Append).
	Append(ctx context.Context, events []Event) (AppendResult, error)
	// AppendIf appends events only if cond holds (see Store.AppendIf).
	AppendIf(ctx context.Context, events []Event, cond appendif.Condition) (AppendResult, error)
	// Read streams the events matching q from one snapshot (see Store.Read).
	Read(ctx context.Context, q query.Query, opts *ReadOptions) *Events
	// ReadAll is Read into a slice (see Store.ReadAll).
	ReadAll(ctx context.Context, q query.Query, opts *ReadOptions) ([]StoredEvent, cursor.Cursor, error)
	// ReadLast returns the last event matching q (see Store.ReadLast).
	ReadLast(ctx context.Context, q query.Query) (*StoredEvent, cursor.Cursor, error)
	// Head returns a cursor at the end of the log (see Store.Head).
	Head(ctx context.Context) (cursor.Cursor, error)
	// Project folds the projectors' events and returns the condition to
	// append with (see Store.Project).
	Project(ctx context.Context, projectors ...Projector) (appendif.Condition, error)
	// ReadTail reads a page of a tailing read (see Store.ReadTail).
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

var _ Interface = (*Store)(nil)

// errReadTwice is the error of a second iteration of Events.All.
var errReadTwice = errors.New("pgdcb: read: Events.All iterated twice (read again instead)")

// NewEvents returns an Events for implementers of Interface (the
// PostgreSQL store builds its own; see the package documentation,
// "Implementing Interface"). read runs when All is first iterated: it
// returns the matching events in the order All yields them and the decision
// cursor (see Events.Cursor), or an error, which All yields alone. A second
// iteration yields an error, as Store.Read's does.
func NewEvents(read func() ([]StoredEvent, cursor.Cursor, error)) *Events {
	es := &Events{}
	es.seq = iter.Seq2[StoredEvent, error](func(yield func(StoredEvent, error) bool) {
		if es.started {
			yield(StoredEvent{}, errReadTwice)
			return
		}
		es.started = true
		evs, c, err := read()
		if err != nil {
			yield(StoredEvent{}, err)
			return
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
		es.cursor, es.head = c, c
		es.done = true
	})
	return es
}
