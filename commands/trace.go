package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Record is a row of the commands table: the command that produced the events
// of one transaction.
type Record struct {
	TransactionID uint64
	CommandID     uuid.UUID
	Type          string
	Data          json.RawMessage
	Metadata      json.RawMessage
	OccurredAt    time.Time
}

type statements struct {
	insertCommand, commandByID, commandOfEvent string
}

func newStatements(schema string) statements {
	const cols = `transaction_id, command_id, type, data, metadata, occurred_at`
	return statements{
		// transaction_id defaults to pg_current_xact_id(): the xid the append gave
		// the transaction, so the row joins its events.
		insertCommand: `INSERT INTO ` + schema + `.commands (command_id, type, data, metadata)
			VALUES ($1, $2, $3::jsonb, $4::jsonb) RETURNING transaction_id, occurred_at`,
		// commands_command_id_key (the UNIQUE index) finds the row.
		commandByID: `SELECT ` + cols + ` FROM ` + schema + `.commands WHERE command_id = $1`,
		// events_pkey finds the event, commands_pkey (transaction_id) its command.
		commandOfEvent: `SELECT c.transaction_id, c.command_id, c.type, c.data, c.metadata, c.occurred_at
			FROM ` + schema + `.events e JOIN ` + schema + `.commands c ON c.transaction_id = e.transaction_id
			WHERE e.position = $1`,
	}
}

func scanRecord(row pgx.Row) (Record, error) {
	var (
		r    Record
		id   pgtype.UUID
		meta []byte
		at   pgtype.Timestamptz
	)
	if err := row.Scan(&r.TransactionID, &id, &r.Type, &r.Data, &meta, &at); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Record{}, fmt.Errorf("%w: no such command", ErrCommandNotFound)
		}
		return Record{}, errfmt.Errorf("pgdcb: commands: read command: %w", err)
	}
	if id.Valid {
		r.CommandID = id.Bytes
	}
	r.Metadata = meta
	r.OccurredAt = at.Time
	return r, nil
}

// Command returns the commands row of a command id, or ErrCommandNotFound.
// It needs the PostgreSQL store (errors.ErrUnsupported otherwise).
func (e *Executor) Command(ctx context.Context, id uuid.UUID) (Record, error) {
	if e.pg == nil {
		return Record{}, e.unsupported("Command")
	}
	return scanRecord(e.pg.Pool().QueryRow(ctx, e.sql.commandByID, pgtype.UUID{Bytes: id, Valid: true}))
}

// CommandOfEvent returns the command that appended the event at position, or
// ErrCommandNotFound (no such event, or it was not appended by a command).
// It needs the PostgreSQL store (errors.ErrUnsupported otherwise).
func (e *Executor) CommandOfEvent(ctx context.Context, position int64) (Record, error) {
	if e.pg == nil {
		return Record{}, e.unsupported("CommandOfEvent")
	}
	return scanRecord(e.pg.Pool().QueryRow(ctx, e.sql.commandOfEvent, position))
}

func (e *Executor) unsupported(op string) error {
	return &unsupportedStoreError{Op: op, Store: fmt.Sprintf("%T", e.store)}
}

// EventsOfCommand returns a command's row and the events its transaction
// appended, in log order; ErrCommandNotFound if the id was never executed.
// It needs the PostgreSQL store (errors.ErrUnsupported otherwise).
func (e *Executor) EventsOfCommand(ctx context.Context, id uuid.UUID) (Record, []pgdcb.StoredEvent, error) {
	rec, err := e.Command(ctx, id)
	if err != nil {
		return Record{}, nil, err
	}
	events, err := e.eventsOfCommand(ctx, id)
	return rec, events, err
}

// eventsOfCommand reads the command's events through the store (every event
// the executor appends carries the command_id tag), in log order.
func (e *Executor) eventsOfCommand(ctx context.Context, id uuid.UUID) ([]pgdcb.StoredEvent, error) {
	idTag, err := tags.New(CommandIDTagKey, id.String())
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: commands: read events: %w", err)
	}
	events, _, err := e.store.ReadAll(ctx, query.New(query.Item{Tags: tags.MustParseSet(idTag.String())}), nil)
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: commands: read events: %w", err)
	}
	return events, nil
}
