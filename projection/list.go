package projection

import (
	"context"
	"fmt"
	"time"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
)

// List reads every checkpoint of the store (projections and outbox
// publishers), ordered by name.
func List(ctx context.Context, store *eventstore.Store) ([]Status, error) {
	rows, err := store.Pool().Query(ctx, `SELECT name, status, transaction_id, position, error_count,
		coalesce(last_error, ''), coalesce(leader, ''), heartbeat_at, updated_at, coalesce(read_model, '{}')
		FROM `+ident.Schema(store)+`.checkpoints ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("pgdcb: projection: list: %w", err)
	}
	defer rows.Close()
	var out []Status
	for rows.Next() {
		var (
			st Status
			hb *time.Time
		)
		if err := rows.Scan(&st.Name, &st.State, &st.Cursor.TransactionID, &st.Cursor.Position, &st.ErrorCount, &st.LastError, &st.Leader, &hb, &st.UpdatedAt, &st.Tables); err != nil {
			return nil, fmt.Errorf("pgdcb: projection: list: %w", err)
		}
		if hb != nil {
			st.HeartbeatAt = *hb
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgdcb: projection: list: %w", err)
	}
	return out, nil
}
