package commands

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
)

// CommandIDTagKey is the tag key the executor adds to every event of a command:
// command_id=<uuid>.
const CommandIDTagKey = "command_id"

// Command is one request to change the log.
type Command struct {
	// ID makes the command idempotent: running the same ID again returns the
	// first outcome and appends nothing. uuid.Nil: the executor assigns a fresh
	// UUIDv7 (the command is then not retry-safe across calls).
	ID uuid.UUID
	// Type names the command (1..64 bytes); it selects the registered handler
	// when Handler is nil and is recorded in the commands table.
	Type string
	// Data is the command's JSON payload, recorded as is. nil is recorded as {}.
	Data json.RawMessage
	// Metadata is optional JSON recorded with the command.
	Metadata json.RawMessage
	// Handler decides the command. nil: the handler registered for Type.
	Handler Handler
}

// Handler decides a command from state it reads through the DecideContext.
//
// It returns the events to append and the condition to append them under
// (usually the one DecideContext.Project returned). Returning an error rejects
// the command; it is not retried. Returning no events records the command
// without events. Decide may run several times for one Execute (once per
// attempt), so it must not have side effects outside the store.
type Handler interface {
	Decide(ctx context.Context, dc *DecideContext) ([]pgdcb.Event, appendif.Condition, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, dc *DecideContext) ([]pgdcb.Event, appendif.Condition, error)

// Decide implements Handler.
func (f HandlerFunc) Decide(ctx context.Context, dc *DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
	return f(ctx, dc)
}

// Outcome is what an executed command produced.
type Outcome struct {
	// CommandID is the command's id (the caller's or the assigned one).
	CommandID uuid.UUID
	// TransactionID is the xid8 of the transaction that recorded the command.
	TransactionID uint64
	// Events are the events the command appended, in log order, as stored.
	Events []pgdcb.StoredEvent
	// Attempts is how many decisions this call made (0 for a Duplicate found
	// before deciding). It is also set, with CommandID, on the Outcome
	// returned with a *RejectedError or an *AttemptsExhaustedError.
	Attempts int
	// Duplicate is true when the command id had already been executed: the
	// outcome is the first execution's, and nothing was appended by this call.
	Duplicate bool
}
