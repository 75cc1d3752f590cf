package projection

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
)

// partitioned reports whether name is a partitioned projection (it has
// partition rows).
func partitioned(ctx context.Context, store *eventstore.Store, name string) (bool, error) {
	var ok bool
	// projection_partitions primary key (its name prefix).
	err := store.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+ident.Schema(store)+`.projection_partitions WHERE name = $1)`, name).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("pgdcb: projection: reset %q: %w", name, err)
	}
	return ok, nil
}

// resetPartitioned is Reset of a partitioned projection, in one
// transaction: clear first (a batch writes the read model before its
// partition's row, so the tables are locked in that order here too), then
// every partition's cursor to the start of the log with its logical
// checkpoint gone, its lease ended and its epoch moved on. A batch in
// flight then fails its compare-and-set, whatever it read: the cursor alone
// would not do, since a partition at the start before the reset is at the
// start after it, while a logical stream has moved on. Every worker loses
// its partitions and claims them again, with streams opened anew from the
// start. The partitions' replication slots not streamed from are dropped (a
// streamed one is replaced by its reader, as a Runner's is).
func resetPartitioned(ctx context.Context, store *eventstore.Store, name string, clear func(ctx context.Context, tx pgx.Tx) error) error {
	schema := ident.Schema(store)
	return pgx.BeginTxFunc(ctx, store.Pool(), pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if clear != nil {
			if err := clear(ctx, tx); err != nil {
				return fmt.Errorf("pgdcb: projection: reset %q: clearing the read model: %w", name, err)
			}
		}
		// projection_partitions primary key (its name prefix).
		rows, err := tx.Query(ctx, `UPDATE `+schema+`.projection_partitions
			SET transaction_id = '0', position = 0, logical_checkpoint = NULL,
			    owner = NULL, lease_until = NULL, epoch = epoch + 1, updated_at = now()
			WHERE name = $1 RETURNING partition`, name)
		if err != nil {
			return fmt.Errorf("pgdcb: projection: reset %q: %w", name, err)
		}
		parts, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("pgdcb: projection: reset %q: %w", name, err)
		}
		slots := make([]string, len(parts))
		for i, part := range parts {
			slots[i] = partitionSlot(store.Schema(), name, int(part))
		}
		if err := dropIdleSlots(ctx, tx, slots...); err != nil {
			return fmt.Errorf("pgdcb: projection: reset %q: dropping the replication slots: %w", name, err)
		}
		return nil
	})
}
