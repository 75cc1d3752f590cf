package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/pgjson"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Executor runs commands against a store. It is safe for concurrent use.
type Executor struct {
	store pgdcb.Store
	pg    *eventstore.Store // store, when it is the PostgreSQL store; else nil
	cfg   Config
	stats stats
	sql   statements

	mu       sync.RWMutex
	handlers map[string]Handler
}

// New returns an Executor over the store.
//
// On the PostgreSQL store (*eventstore.Store) every attempt runs in a
// transaction that also records the command in the commands table; the
// store's schema must be migrated (the table comes with the core
// migrations). Any other pgdcb.Store (the in-memory store of
// package memstore, for tests) gets the same Execute — the command_id tag
// and idempotency query, retries on conflicts, the same errors, Duplicate
// outcomes — with two differences, since there is no commands table: a
// command that decides no events is not recorded (executing its id again
// runs the handler again), and the tracing helpers (Command,
// CommandOfEvent, EventsOfCommand) return an error matching errors.ErrUnsupported.
func New(store pgdcb.Store, cfg *Config) (*Executor, error) {
	pg, isPG := store.(*eventstore.Store)
	if store == nil || (isPG && pg == nil) {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidCommand)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	e := &Executor{
		store:    store,
		pg:       pg,
		cfg:      c,
		handlers: map[string]Handler{},
	}
	if pg != nil {
		e.sql = newStatements(ident.Schema(pg))
	}
	return e, nil
}

// Register sets the handler for commands of the given type whose Handler field
// is nil. Registering a type twice replaces the handler.
func (e *Executor) Register(cmdType string, h Handler) error {
	if err := query.ValidateType(cmdType); err != nil || h == nil {
		return &invalidCommandError{Type: cmdType, Reason: "Register needs a valid type (1..64 bytes) and a handler"}
	}
	e.mu.Lock()
	e.handlers[cmdType] = h
	e.mu.Unlock()
	return nil
}

// errDuplicateRow: the commands row's UNIQUE(command_id) refused the insert.
var errDuplicateRow = errors.New("pgdcb: commands: duplicate command id")

// Execute decides the command and appends its events, retrying on conflicts
// (see the package documentation). It returns the outcome, or:
//   - *RejectedError wrapping the handler's error (never retried), with an
//     Outcome holding CommandID and Attempts;
//   - *AttemptsExhaustedError (pgdcb.ErrConditionFailed) after MaxAttempts
//     conflicts;
//   - ErrInvalidCommand (the error says what is wrong), ErrNoHandler, or a store or
//     context error.
//
// When the command's ID was already executed, Execute returns that first
// outcome with Duplicate set and appends nothing.
func (e *Executor) Execute(ctx context.Context, cmd Command) (Outcome, error) {
	t := e.cfg.Tracer
	if t == nil {
		var tr execTrace
		return e.execute(ctx, &cmd, &tr)
	}
	start := time.Now()
	ctx = t.TraceExecuteStart(ctx, TraceExecuteData{Type: cmd.Type, CommandID: cmd.ID})
	var tr execTrace
	out, err := e.execute(ctx, &cmd, &tr)
	t.TraceExecuteEnd(ctx, TraceExecuteData{Type: cmd.Type, CommandID: cmd.ID, Result: tr.result,
		Attempts: tr.attempts, Retries: tr.retries, Duration: time.Since(start), Err: err})
	return out, err
}

// execTrace is what one Execute tells its tracer: how it ended, the
// decisions it counted and its retries.
type execTrace struct {
	result            Result
	attempts, retries int
}

// execute is Execute; it assigns cp's id and records its ending in tr.
func (e *Executor) execute(ctx context.Context, cp *Command, tr *execTrace) (Outcome, error) {
	h, err := e.prepare(cp)
	if err != nil {
		e.fail(tr, ResultInvalid)
		return Outcome{}, err
	}
	cmd := *cp
	typ := cmd.Type

	// uncertain is the first attempt whose commit may have happened
	// (pgdcb.ErrOutcomeUnknown). From then on, finding the command already
	// executed means that attempt committed: its outcome is this call's, not
	// a duplicate's; and giving up means the outcome is still unknown.
	var uncertain error
	unsettled := func(attempt int) error {
		return &pgdcb.OutcomeUnknownError{
			Op:  fmt.Sprintf("command %s (%s) after %d attempts", cmd.ID, typ, attempt),
			Err: uncertain}
	}
	for attempt := 1; ; attempt++ {
		out, err := e.attempt(ctx, cmd, h, attempt)
		if err == nil {
			e.stats.executed.Add(1)
			tr.result, tr.attempts = ResultExecuted, attempt
			return out, nil
		}
		var rej *RejectedError
		switch {
		case errors.Is(err, pgdcb.ErrOutcomeUnknown) || (uncertain != nil && !isDecided(err)):
			// Retry through the command id: the retry commits, or finds the
			// first attempt's effect (ErrIdempotent, the commands row). A
			// retry that cannot reach the server leaves the outcome unknown.
			if uncertain == nil {
				uncertain = err
			}
			e.cfg.Logger.WarnContext(ctx, "commands: outcome unknown, retrying through the command id",
				"type", typ, "command_id", cmd.ID, "attempt", attempt, "err", err)
			if attempt >= e.cfg.MaxAttempts || ctx.Err() != nil {
				e.fail(tr, ResultError)
				return Outcome{}, unsettled(attempt)
			}
			if serr := retry.Sleep(ctx, backoff(e.cfg.RetryMin, e.cfg.RetryMax, attempt)); serr != nil {
				e.fail(tr, ResultError)
				return Outcome{}, unsettled(attempt)
			}
			e.stats.retries.Add(1)
			tr.retries++
		case errors.As(err, &rej):
			// A rejection of a command that already ran (a retry that now sees the
			// first execution's effect) answers with the first outcome.
			first, ok, ferr := e.firstOutcome(ctx, cmd.ID)
			if ferr == nil && ok {
				if uncertain != nil {
					return e.ownOutcome(tr, first, attempt), nil
				}
				return e.duplicate(tr, first), nil
			}
			if ferr != nil && uncertain != nil {
				// The rejection may come from this call's own first
				// attempt's effect, which could not be looked up.
				e.fail(tr, ResultError)
				return Outcome{}, unsettled(attempt)
			}
			e.stats.rejected.Add(1)
			tr.attempts = attempt
			e.fail(tr, ResultRejected)
			return Outcome{CommandID: cmd.ID, Attempts: attempt}, err
		case errors.Is(err, pgdcb.ErrIdempotent) || errors.Is(err, errDuplicateRow):
			first, ok, ferr := e.firstOutcome(ctx, cmd.ID)
			if ferr != nil {
				e.fail(tr, ResultError)
				return Outcome{}, ferr
			}
			if !ok { // the handler's own idempotency query (or an event id) matched
				e.fail(tr, ResultRejected)
				return Outcome{}, err
			}
			if uncertain != nil {
				return e.ownOutcome(tr, first, attempt), nil
			}
			return e.duplicate(tr, first), nil
		case errors.Is(err, pgdcb.ErrConditionFailed):
			e.stats.conflicts.Add(1)
			if attempt >= e.cfg.MaxAttempts {
				e.stats.exhausted.Add(1)
				tr.attempts = attempt
				e.fail(tr, ResultConflict)
				return Outcome{CommandID: cmd.ID, Attempts: attempt}, &AttemptsExhaustedError{Type: typ, Attempts: attempt, Err: err}
			}
			e.cfg.Logger.DebugContext(ctx, "command conflict, deciding again",
				"type", typ, "command_id", cmd.ID, "attempt", attempt, "err", err)
			if serr := retry.Sleep(ctx, backoff(e.cfg.RetryMin, e.cfg.RetryMax, attempt)); serr != nil {
				e.fail(tr, ResultError)
				return Outcome{}, errfmt.Errorf("pgdcb: commands: %s: after %d attempts: %w", typ, attempt, serr)
			}
			e.stats.retries.Add(1)
			tr.retries++
		default:
			e.fail(tr, ResultError)
			return Outcome{}, err
		}
	}
}

func (e *Executor) duplicate(tr *execTrace, first Outcome) Outcome {
	e.stats.idempotent.Add(1)
	tr.result = ResultDuplicate
	first.Duplicate = true
	first.Attempts = 0
	return first
}

// ownOutcome is the outcome of this call's own earlier attempt, whose commit
// was in doubt and turned out to have happened.
func (e *Executor) ownOutcome(tr *execTrace, first Outcome, attempt int) Outcome {
	e.stats.executed.Add(1)
	tr.result, tr.attempts = ResultExecuted, attempt
	first.Attempts = attempt
	return first
}

// isDecided: err settles a command whatever an earlier attempt did (a
// rejection, the command found executed, a conflict to decide again on).
func isDecided(err error) bool {
	var rej *RejectedError
	return errors.As(err, &rej) || errors.Is(err, pgdcb.ErrIdempotent) ||
		errors.Is(err, errDuplicateRow) || errors.Is(err, pgdcb.ErrConditionFailed)
}

// infrastructure reports whether a Decide error comes from the store or the
// context rather than from the handler's business rules: such errors are
// returned as they are, never as a *RejectedError.
func infrastructure(ctx context.Context, dc *DecideContext, err error) bool {
	if dc.readErr != nil || ctx.Err() != nil {
		return true
	}
	var pgErr *pgconn.PgError
	var netErr net.Error
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &pgErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgdcb.ErrOutcomeUnknown) || pgconn.Timeout(err)
}

// fail records a command that did not commit.
func (e *Executor) fail(tr *execTrace, r Result) {
	if r == ResultError || r == ResultInvalid {
		e.stats.errors.Add(1)
	}
	tr.result = r
}

// prepare validates the command, assigns its id and finds its handler.
func (e *Executor) prepare(cmd *Command) (Handler, error) {
	if err := query.ValidateType(cmd.Type); err != nil {
		return nil, &invalidCommandError{Type: cmd.Type, Reason: "type must be 1..64 bytes of valid text"}
	}
	if cmd.Data == nil {
		cmd.Data = json.RawMessage(`{}`)
	}
	if err := pgjson.Validate(cmd.Data); err != nil {
		return nil, &invalidCommandError{Type: cmd.Type, Reason: "data is not valid JSON for PostgreSQL's jsonb: " + err.Error()}
	}
	if len(cmd.Metadata) > 0 {
		if err := pgjson.Validate(cmd.Metadata); err != nil {
			return nil, &invalidCommandError{Type: cmd.Type, Reason: "metadata is not valid JSON for PostgreSQL's jsonb: " + err.Error()}
		}
	}
	if cmd.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, errfmt.Errorf("pgdcb: commands: new command id: %w", err)
		}
		cmd.ID = id
	}
	h := cmd.Handler
	if h == nil {
		e.mu.RLock()
		h = e.handlers[cmd.Type]
		e.mu.RUnlock()
	}
	if h == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoHandler, cmd.Type)
	}
	return h, nil
}

// attempt is one decision and, if it commits, the command's outcome.
func (e *Executor) attempt(ctx context.Context, cmd Command, h Handler, attempt int) (Outcome, error) {
	if e.pg == nil {
		return e.attemptStore(ctx, cmd, h, attempt)
	}
	tx, err := e.pg.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return Outcome{}, errfmt.Errorf("pgdcb: commands: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	events, cond, err := decide(ctx, cmd, h, attempt, txReader{e.pg, tx})
	if err != nil {
		return Outcome{}, err
	}

	out := Outcome{CommandID: cmd.ID, Attempts: attempt}
	if len(events) > 0 {
		tagged, cond, err := tagCommand(cmd, events, cond)
		if err != nil {
			return Outcome{}, err
		}
		res, err := e.pg.AppendIfTx(ctx, tx, tagged, cond)
		if err != nil {
			return Outcome{}, err
		}
		out.Events = stored(tagged, res)
	}

	var meta *string
	if len(cmd.Metadata) > 0 {
		m := string(cmd.Metadata)
		meta = &m
	}
	var at pgtype.Timestamptz
	// A plain insert; the UNIQUE index on command_id backs up idempotency
	// (it is what catches duplicates of commands without events).
	err = tx.QueryRow(ctx, e.sql.insertCommand,
		pgtype.UUID{Bytes: cmd.ID, Valid: true}, cmd.Type, string(cmd.Data), meta,
	).Scan(&out.TransactionID, &at)
	if err != nil {
		if pgcode.Of(err) == pgcode.UniqueViolation {
			return Outcome{}, errDuplicateRow
		}
		return Outcome{}, errfmt.Errorf("pgdcb: commands: record command: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		if pgcode.Of(err) == pgcode.UniqueViolation {
			return Outcome{}, errDuplicateRow
		}
		// A lost connection or an ended context around COMMIT: it may have
		// committed (pgdcb.ErrOutcomeUnknown); Execute retries through the
		// command id.
		return Outcome{}, errfmt.Errorf("pgdcb: commands: %w", eventstore.MarkOutcomeUnknown("commit", err))
	}
	if len(out.Events) > 0 {
		e.pg.Notify(ctx) // wake tailing readers now rather than at their next poll
	}
	for i := range out.Events {
		out.Events[i].OccurredAt = at.Time
	}
	return out, nil
}

// firstOutcome reads back the outcome of an executed command id: on
// PostgreSQL its commands row and events, on other stores its events (found
// when it appended any).
func (e *Executor) firstOutcome(ctx context.Context, id uuid.UUID) (Outcome, bool, error) {
	if e.pg == nil {
		events, err := e.eventsOfCommand(ctx, id)
		if err != nil || len(events) == 0 {
			return Outcome{}, false, err
		}
		return Outcome{CommandID: id, TransactionID: events[0].TransactionID, Events: events}, true, nil
	}
	rec, events, err := e.EventsOfCommand(ctx, id)
	if errors.Is(err, ErrCommandNotFound) {
		return Outcome{}, false, nil
	}
	if err != nil {
		return Outcome{}, false, err
	}
	return Outcome{CommandID: id, TransactionID: rec.TransactionID, Events: events}, true, nil
}

// decide runs the handler on r; a handler's own error is a *RejectedError,
// a failure of the store or the context is returned as it is.
func decide(ctx context.Context, cmd Command, h Handler, attempt int, r reader) ([]pgdcb.Event, appendif.Condition, error) {
	dc := &DecideContext{Command: cmd, Attempt: attempt, r: r}
	events, cond, err := h.Decide(ctx, dc)
	if err != nil {
		if infrastructure(ctx, dc, err) {
			return nil, cond, errfmt.Errorf("pgdcb: commands: %s: decide: %w", cmd.Type, err)
		}
		return nil, cond, &RejectedError{Type: cmd.Type, Attempt: attempt, Err: err}
	}
	return events, cond, nil
}

// tagCommand tags every event with command_id=<id> and adds "any event so
// tagged" to the condition's idempotency query.
func tagCommand(cmd Command, events []pgdcb.Event, cond appendif.Condition) ([]pgdcb.Event, appendif.Condition, error) {
	idTag, err := tags.New(CommandIDTagKey, cmd.ID.String())
	if err != nil {
		return nil, cond, errfmt.Errorf("pgdcb: commands: %w", err)
	}
	tagged := make([]pgdcb.Event, len(events))
	for i, ev := range events {
		set, err := tags.NewSet(append(ev.Tags.Tags(), idTag)...)
		if err != nil {
			return nil, cond, &invalidCommandError{Type: cmd.Type,
				Reason: fmt.Sprintf("event %d (%s): cannot add tag %s: %v", i, ev.Type, idTag, err)}
		}
		ev.Tags = set
		tagged[i] = ev
	}
	idem := query.New(query.Item{Tags: tags.MustParseSet(idTag.String())})
	return tagged, cond.WithIdempotency(cond.Idempotency.Or(idem)), nil
}

// stored are the appended events as the append stored them.
func stored(tagged []pgdcb.Event, res pgdcb.AppendResult) []pgdcb.StoredEvent {
	out := make([]pgdcb.StoredEvent, len(tagged))
	for i, ev := range tagged {
		out[i] = pgdcb.StoredEvent{Event: ev, Position: res.Positions[i], TransactionID: res.TransactionID}
	}
	return out
}

// attemptStore is one attempt on a store other than PostgreSQL: decide,
// then AppendIf. Nothing records the command besides its events' tag.
func (e *Executor) attemptStore(ctx context.Context, cmd Command, h Handler, attempt int) (Outcome, error) {
	events, cond, err := decide(ctx, cmd, h, attempt, e.store)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{CommandID: cmd.ID, Attempts: attempt}
	if len(events) == 0 {
		return out, nil
	}
	tagged, cond, err := tagCommand(cmd, events, cond)
	if err != nil {
		return Outcome{}, err
	}
	res, err := e.store.AppendIf(ctx, tagged, cond)
	if err != nil {
		return Outcome{}, err
	}
	// Read back for OccurredAt, which the store stamped.
	out.TransactionID = res.TransactionID
	if out.Events, err = e.eventsOfCommand(ctx, cmd.ID); err != nil || len(out.Events) != len(tagged) {
		out.Events = stored(tagged, res)
	}
	return out, nil
}
