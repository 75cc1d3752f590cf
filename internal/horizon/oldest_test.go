package horizon_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/horizon"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

// TestOldest is not parallel: its open transaction holds back
// every tailing reader.
func TestOldest(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	var pid int
	var start time.Time
	var xid string
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid(), now(), pg_current_xact_id()::text`).Scan(&pid, &start, &xid))
	h, ok, err := horizon.Oldest(ctx, pool)
	require.NoError(t, err)
	require.True(t, ok, "our open transaction has an xid")
	// Other packages may hold an older transaction on the shared server.
	require.False(t, h.XactStart.After(start), "%+v is younger than our transaction", h)
	require.NoError(t, tx.Rollback(ctx))
}
