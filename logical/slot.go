package logical

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgcode"
)

// ErrSlotLost: the reader's replication slot is gone (dropped by someone
// else) or was invalidated by max_slot_wal_keep_size (wal_status 'lost')
// while the reader's checkpoint still needs it, and the checkpoint cannot
// resynchronise from the log: it names no consumed set (Checkpoint.Done:
// stored while a backlog was in flight, or before the reader's first sample
// of the log) or the slot was lost during a snapshot read. Open
// resynchronises every other lost slot itself. The reader stops rather than
// skip or repeat events; rebuild it (projection.Reset drops the slot and
// starts over from a snapshot read of the log).
var ErrSlotLost = errors.New("pgdcb: logical: replication slot lost")

// slotLostError names the slot and what was found.
type slotLostError struct {
	Slot   string
	Reason string
}

func (e *slotLostError) Error() string {
	return fmt.Sprintf("pgdcb: logical: replication slot %s lost: %s", e.Slot, e.Reason)
}

func (e *slotLostError) Is(target error) bool { return target == ErrSlotLost }

// SlotStatus is a replication slot's row of pg_replication_slots.
type SlotStatus struct {
	Slot string
	// Exists is false when there is no such slot (the other fields are zero).
	Exists bool
	// Active: a reader streams from it now.
	Active bool
	// WALStatus is pg_replication_slots.wal_status: reserved, extended,
	// unreserved or lost.
	WALStatus string
	// RetainedBytes is the WAL the slot keeps from being recycled:
	// pg_current_wal_lsn() - restart_lsn.
	RetainedBytes int64
	// ConfirmedFlush is the position the reader last confirmed.
	ConfirmedFlush pglogrepl.LSN
}

// GetSlotStatus reads slot's row of pg_replication_slots.
func GetSlotStatus(ctx context.Context, pool *pgxpool.Pool, slot string) (SlotStatus, error) {
	st := SlotStatus{Slot: slot}
	var (
		retained *int64
		flush    *string
	)
	// pg_replication_slots is a view over shared memory: one row per slot.
	err := pool.QueryRow(ctx, `SELECT active, coalesce(wal_status, ''),
			(pg_current_wal_lsn() - restart_lsn)::bigint, confirmed_flush_lsn::text
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&st.Active, &st.WALStatus, &retained, &flush)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("pgdcb: logical: status of slot %s: %w", slot, err)
	}
	st.Exists = true
	if retained != nil {
		st.RetainedBytes = *retained
	}
	if flush != nil {
		if st.ConfirmedFlush, err = pglogrepl.ParseLSN(*flush); err != nil {
			return st, fmt.Errorf("pgdcb: logical: status of slot %s: %w", slot, err)
		}
	}
	return st, nil
}

// DropSlot drops the replication slot (if it exists), so that it retains no
// more WAL: call it when a logical reader is removed for good. It fails while
// a reader streams from the slot. The reader's default slot name is
// SlotName(schema, name).
func DropSlot(ctx context.Context, pool *pgxpool.Pool, slot string) error {
	// pg_replication_slots: one row per slot.
	_, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
	if err != nil {
		return fmt.Errorf("pgdcb: logical: dropping slot %s: %w", slot, err)
	}
	return nil
}

// ensurePublication creates the publication of the schema's events table
// (inserts only) unless it exists. Creating it needs ownership of the events
// table (the migrating role).
func ensurePublication(ctx context.Context, pool *pgxpool.Pool, schema, publication string) error {
	var exists bool
	// pg_publication: unique index on pubname.
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, publication).Scan(&exists); err != nil {
		return fmt.Errorf("pgdcb: logical: publication %s: %w", publication, err)
	}
	if exists {
		return nil
	}
	_, err := pool.Exec(ctx, `CREATE PUBLICATION `+ident.Quote(publication)+` FOR TABLE `+ident.Quote(schema)+`.events WITH (publish = 'insert')`)
	if pgcode.Of(err) == pgcode.DuplicateObject {
		return nil // created meanwhile by another reader
	}
	if err != nil {
		return fmt.Errorf("pgdcb: logical: creating publication %s: %w", publication, err)
	}
	return nil
}
