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

	"github.com/pgdcb/pgdcb/eventstore"
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
	insertCommand, commandByID, commandOfEvent, eventsOfTx string
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
		// events_log_order (transaction_id, position): a range scan of one
		// transaction's events, already in position order.
		eventsOfTx: `SELECT position, transaction_id, type, tags, data, metadata, event_id, occurred_at
			FROM ` + schema + `.events WHERE transaction_id = $1::text::xid8 ORDER BY position`,
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
			return Record{}, ErrCommandNotFound
		}
		return Record{}, fmt.Errorf("commands: read command: %w", err)
	}
	if id.Valid {
		r.CommandID = id.Bytes
	}
	r.Metadata = meta
	r.OccurredAt = at.Time
	return r, nil
}

// Command returns the commands row of a command id, or ErrCommandNotFound.
func (e *Executor) Command(ctx context.Context, id uuid.UUID) (Record, error) {
	return scanRecord(e.store.Pool().QueryRow(ctx, e.sql.commandByID, pgtype.UUID{Bytes: id, Valid: true}))
}

// CommandOfEvent returns the command that appended the event at position, or
// ErrCommandNotFound (no such event, or it was not appended by a command).
func (e *Executor) CommandOfEvent(ctx context.Context, position int64) (Record, error) {
	return scanRecord(e.store.Pool().QueryRow(ctx, e.sql.commandOfEvent, position))
}

// EventsOfCommand returns a command's row and the events its transaction
// appended, in log order; ErrCommandNotFound if the id was never executed.
func (e *Executor) EventsOfCommand(ctx context.Context, id uuid.UUID) (Record, []eventstore.StoredEvent, error) {
	rec, err := e.Command(ctx, id)
	if err != nil {
		return Record{}, nil, err
	}
	events, err := e.eventsOfTransaction(ctx, rec.TransactionID)
	return rec, events, err
}

func (e *Executor) eventsOfTransaction(ctx context.Context, txID uint64) ([]eventstore.StoredEvent, error) {
	rows, err := e.store.Pool().Query(ctx, e.sql.eventsOfTx, fmt.Sprint(txID))
	if err != nil {
		return nil, fmt.Errorf("commands: read events: %w", err)
	}
	defer rows.Close()
	var out []eventstore.StoredEvent
	for rows.Next() {
		var (
			ev         eventstore.StoredEvent
			tgs        []string
			data, meta []byte
			id         pgtype.UUID
			at         pgtype.Timestamptz
		)
		if err := rows.Scan(&ev.Position, &ev.TransactionID, &ev.Type, &tgs, &data, &meta, &id, &at); err != nil {
			return nil, fmt.Errorf("commands: read events: %w", err)
		}
		set, err := tags.ParseSet(tgs...)
		if err != nil {
			return nil, fmt.Errorf("commands: read events: stored tags: %w", err)
		}
		ev.Tags, ev.Data, ev.Metadata, ev.OccurredAt = set, data, meta, at.Time
		if id.Valid {
			ev.ID = id.Bytes
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("commands: read events: %w", err)
	}
	return out, nil
}
