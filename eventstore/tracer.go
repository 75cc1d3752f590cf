package eventstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
)

// Tracer observes the store's calls, in the style of pgx's QueryTracer: each
// Start method may return a derived context (carrying a span, say) that the
// store passes down and then hands to the matching End method. Set it in
// Config.Tracer; nil (the default) costs nothing.
//
// Package pgdcbprom turns the calls into Prometheus metrics and package
// pgdcbotel into OpenTelemetry spans; MultiTracer combines tracers. The store
// calls a Tracer from many goroutines at once, and never with a store lock
// held; a Tracer must not call the store.
type Tracer interface {
	// TraceAppendStart is called when Append, AppendIf, AppendTx or
	// AppendIfTx starts, before the input is checked.
	TraceAppendStart(ctx context.Context, data TraceAppendStartData) context.Context
	// TraceAppendEnd is called when the append returns.
	TraceAppendEnd(ctx context.Context, data TraceAppendEndData)
	// TraceReadStart is called when a read starts: Read and ReadTx when
	// their iteration starts, ReadLast, ReadTail, Head and Project (and their
	// …Tx forms) when called. ReadAll is traced as a Read.
	TraceReadStart(ctx context.Context, data TraceReadStartData) context.Context
	// TraceReadEnd is called when the read ends (for Read, when the
	// iteration ends, also when the caller breaks out of it).
	TraceReadEnd(ctx context.Context, data TraceReadEndData)
}

// Outcome is how a traced call ended.
type Outcome string

// Outcomes of traced calls. An append ends in one of the first six; a read
// in OutcomeOK, OutcomeInvalid or OutcomeError.
const (
	// OutcomeCommitted: the append stored its events (in a caller's
	// transaction: the append succeeded, and the caller's commit decides).
	OutcomeCommitted Outcome = "committed"
	// OutcomeConditionFailed: AppendIf's condition failed
	// (pgdcb.ErrConditionFailed); nothing was appended.
	OutcomeConditionFailed Outcome = "condition_failed"
	// OutcomeIdempotent: the idempotency query or an event id matched
	// (pgdcb.ErrIdempotent); nothing was appended.
	OutcomeIdempotent Outcome = "idempotent"
	// OutcomeInvalid: the input or the call was refused (invalid events,
	// queries, tags, cursors or arguments, or a transaction the append cannot
	// be correct in); nothing was sent, or the server refused it.
	OutcomeInvalid Outcome = "invalid"
	// OutcomeUnknown: the append may or may not have committed
	// (pgdcb.ErrOutcomeUnknown).
	OutcomeUnknown Outcome = "unknown"
	// OutcomeError: any other failure (the server, the network, a context
	// that ended before anything was sent); nothing was appended.
	OutcomeError Outcome = "error"
	// OutcomeOK: a read returned without error.
	OutcomeOK Outcome = "ok"
)

// OutcomeOf returns the Outcome a tracer reports for a call's error:
// OutcomeOK for nil (an append's nil is OutcomeCommitted). (To mark a
// commit's error as an unknown outcome, see MarkOutcomeUnknown.)
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, pgdcb.ErrOutcomeUnknown):
		return OutcomeUnknown
	case errors.Is(err, pgdcb.ErrConditionFailed):
		return OutcomeConditionFailed
	case errors.Is(err, pgdcb.ErrIdempotent):
		return OutcomeIdempotent
	case errors.Is(err, pgdcb.ErrInvalidEvent), errors.Is(err, pgdcb.ErrInvalidQuery),
		errors.Is(err, pgdcb.ErrInvalidTag), errors.Is(err, pgdcb.ErrInvalidCursor),
		errors.Is(err, pgdcb.ErrInvalidArgument), errors.Is(err, pgdcb.ErrTransactionState):
		return OutcomeInvalid
	}
	return OutcomeError
}

// TraceAppendStartData describes an append that starts.
type TraceAppendStartData struct {
	// Events are the events to append, as given (not yet checked).
	Events []pgdcb.Event
	// Condition is AppendIf's condition; nil for Append.
	Condition *appendif.Condition
	// InTx: AppendTx or AppendIfTx (the caller's transaction).
	InTx bool
}

// TraceAppendEndData describes how an append ended.
type TraceAppendEndData struct {
	// Outcome classifies Err (OutcomeCommitted when Err is nil).
	Outcome Outcome
	// Err is the error the call returns; nil when it committed.
	Err error
	// Result is what the call returns (zero unless committed).
	Result pgdcb.AppendResult
	// Events is the number of events of the append (appended when
	// committed).
	Events int
	// Duration is the time from TraceAppendStart to TraceAppendEnd.
	Duration time.Duration
	// Grouped: with group commit on (the default), the append was sent in one server
	// call together with other appends; GroupSize is that call's number of
	// appends (0 when not grouped).
	Grouped   bool
	GroupSize int
	// CheckItems is the number of query items of the call's checks: the
	// items of its idempotency query and of its condition, each one check
	// statement inside the append (the server stops at the first that
	// matches, so a refused call may have run fewer). 0 for Append, and for
	// a call that ended before the server decided it (invalid input, an
	// error, an unknown outcome). The rows those statements read are the
	// server's to count: pg_stat_user_indexes.idx_tup_read of the events
	// indexes (docs/METRICS.md).
	CheckItems int
}

// ReadOp names the kind of a traced read.
type ReadOp string

// The traced reads.
const (
	ReadOpRead     ReadOp = "read"      // Read, ReadTx, ReadAll, ReadAllTx
	ReadOpReadLast ReadOp = "read_last" // ReadLast, ReadLastTx
	ReadOpReadTail ReadOp = "read_tail" // ReadTail, ReadTailTx (subscriptions, projections, outbox)
	ReadOpHead     ReadOp = "head"      // Head, HeadTx
	ReadOpProject  ReadOp = "project"   // Project, ProjectTx (snapshot loads and writes included)
)

// TraceReadStartData describes a read that starts.
type TraceReadStartData struct {
	Op ReadOp
	// Query is the read's query (for Project, the union of the projectors'
	// queries; empty for Head).
	Query query.Query
	// InTx: the …Tx form (the caller's transaction).
	InTx bool
}

// TraceReadEndData describes how a read ended.
type TraceReadEndData struct {
	Op ReadOp
	// Outcome classifies Err (OutcomeOK when Err is nil).
	Outcome Outcome
	// Err is the error the read returns (or yields).
	Err error
	// Events is the number of events read from the server: returned (Read,
	// ReadLast, ReadTail) or folded into the projectors (Project, after
	// their snapshots); 0 for Head.
	Events int
	// Duration is the time from TraceReadStart to TraceReadEnd.
	Duration time.Duration
}

// MultiTracer returns a Tracer that calls each of tracers in turn (Start in
// order, each on the context the previous returned; End in order, on the
// last context). Nil tracers are skipped.
func MultiTracer(tracers ...Tracer) Tracer {
	var ts multiTracer
	for _, t := range tracers {
		if t != nil {
			ts = append(ts, t)
		}
	}
	return ts
}

type multiTracer []Tracer

func (m multiTracer) TraceAppendStart(ctx context.Context, data TraceAppendStartData) context.Context {
	for _, t := range m {
		ctx = t.TraceAppendStart(ctx, data)
	}
	return ctx
}

func (m multiTracer) TraceAppendEnd(ctx context.Context, data TraceAppendEndData) {
	for _, t := range m {
		t.TraceAppendEnd(ctx, data)
	}
}

func (m multiTracer) TraceReadStart(ctx context.Context, data TraceReadStartData) context.Context {
	for _, t := range m {
		ctx = t.TraceReadStart(ctx, data)
	}
	return ctx
}

func (m multiTracer) TraceReadEnd(ctx context.Context, data TraceReadEndData) {
	for _, t := range m {
		t.TraceReadEnd(ctx, data)
	}
}

// opTrace is one traced call in flight, carried in its context so that the
// code below the public methods can add what only it knows (events read, the
// group an append was sent in). Fields are atomic: a group sender may write
// after the caller gave up waiting.
type opTrace struct {
	tracer     Tracer
	ctx        context.Context // the tracer's context
	start      time.Time
	events     atomic.Int64
	groupSize  atomic.Int64
	checkItems int // set before the call is shared
}

type opTraceKey struct{}

// traceOf returns the call's trace record; nil when the store has no tracer
// (without looking at the context) or the call is not traced.
func (s *Store) traceOf(ctx context.Context) *opTrace {
	if s.cfg.Tracer == nil {
		return nil
	}
	t, _ := ctx.Value(opTraceKey{}).(*opTrace)
	return t
}

func (t *opTrace) addEvents(n int) {
	if t != nil {
		t.events.Add(int64(n))
	}
}

// markGrouped records that the append of ctx was sent in a group of n.
func (s *Store) markGrouped(ctx context.Context, n int) {
	if t := s.traceOf(ctx); t != nil {
		t.groupSize.Store(int64(n))
	}
}

func (s *Store) startTrace(ctx context.Context, start func(context.Context) context.Context) (context.Context, *opTrace) {
	t := &opTrace{tracer: s.cfg.Tracer, start: time.Now()}
	t.ctx = start(ctx)
	return context.WithValue(t.ctx, opTraceKey{}, t), t
}

// startAppend starts tracing an append; the returned *opTrace is nil (and
// ctx unchanged) without a tracer.
func (s *Store) startAppend(ctx context.Context, events []pgdcb.Event, cond *appendif.Condition, inTx bool) (context.Context, *opTrace) {
	tr := s.cfg.Tracer
	if tr == nil {
		return ctx, nil
	}
	ctx, t := s.startTrace(ctx, func(ctx context.Context) context.Context {
		return tr.TraceAppendStart(ctx, TraceAppendStartData{Events: events, Condition: cond, InTx: inTx})
	})
	if cond != nil {
		t.checkItems = len(cond.Idempotency.Items()) + len(cond.FailIfEventsMatch.Items())
	}
	return ctx, t
}

// endAppend ends the append's trace (nothing when t is nil).
func (t *opTrace) endAppend(events int, res pgdcb.AppendResult, err error) {
	if t == nil {
		return
	}
	o := outcomeOf(err)
	if err == nil {
		o = OutcomeCommitted
	}
	g := int(t.groupSize.Load())
	checks := 0
	switch o {
	case OutcomeCommitted, OutcomeConditionFailed, OutcomeIdempotent:
		checks = t.checkItems
	}
	t.tracer.TraceAppendEnd(t.ctx, TraceAppendEndData{Outcome: o, Err: err, Result: res, Events: events,
		Duration: time.Since(t.start), Grouped: g > 0, GroupSize: g, CheckItems: checks})
}

// startRead starts tracing a read; nil without a tracer.
func (s *Store) startRead(ctx context.Context, op ReadOp, q query.Query, db dbtx) (context.Context, *opTrace) {
	tr := s.cfg.Tracer
	if tr == nil {
		return ctx, nil
	}
	_, inTx := db.(pgx.Tx)
	return s.startTrace(ctx, func(ctx context.Context) context.Context {
		return tr.TraceReadStart(ctx, TraceReadStartData{Op: op, Query: q, InTx: inTx})
	})
}

// endRead ends the read's trace (nothing when t is nil).
func (t *opTrace) endRead(op ReadOp, err error) {
	if t == nil {
		return
	}
	t.tracer.TraceReadEnd(t.ctx, TraceReadEndData{Op: op, Outcome: outcomeOf(err), Err: err,
		Events: int(t.events.Load()), Duration: time.Since(t.start)})
}

// tracedRead is read for the public Read forms: traced from the start of the
// iteration to its end when the store has a tracer.
func (s *Store) tracedRead(ctx context.Context, db dbtx, op ReadOp, q query.Query, opts *pgdcb.ReadOptions) *events {
	if s.cfg.Tracer == nil {
		return s.read(ctx, db, q, opts)
	}
	out := &events{}
	var inner *events
	out.seq = func(yield func(pgdcb.StoredEvent, error) bool) {
		if inner != nil { // iterated twice: the inner read says so
			for ev, err := range inner.All() {
				if !yield(ev, err) {
					return
				}
			}
			return
		}
		tctx, t := s.startRead(ctx, op, q, db)
		inner = s.read(tctx, db, q, opts)
		var err error
		defer func() {
			out.cursor, out.head, out.durable, out.started, out.done = inner.cursor, inner.head, inner.durable, inner.started, inner.done
			t.endRead(op, err)
		}()
		for ev, e := range inner.All() {
			if e != nil {
				err = e
			}
			if !yield(ev, e) {
				return
			}
		}
	}
	return out
}
