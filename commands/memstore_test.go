package commands_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/memstore"
)

// The executor on a store other than PostgreSQL (memstore): the same
// Execute semantics without the commands table. The scenarios that hold on
// every store run on both (see onEachStore); these are memstore's own.

func newMemExecutor(t testing.TB, cfg *commands.Config) (*commands.Executor, *memstore.Store) {
	t.Helper()
	s := memstore.MustNew(nil)
	ex, err := commands.New(s, cfg)
	require.NoError(t, err)
	return ex, s
}

// The documented difference: without a commands table, a command that
// decides no events leaves nothing behind, so its id is not remembered.
func TestMemExecuteZeroEventsIsNotRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex, _ := newMemExecutor(t, nil)
	var calls atomic.Int32
	c := cmd("Noop", noop(&calls))
	c.ID = uuid.New()
	out, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	require.Empty(t, out.Events)
	require.Zero(t, out.TransactionID)
	again, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	require.False(t, again.Duplicate)
	require.EqualValues(t, 2, calls.Load())
}

func TestMemExecuteTracingNeedsPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex, _ := newMemExecutor(t, nil)
	out, err := ex.Execute(ctx, cmd("Increment", increment("a", 10)))
	require.NoError(t, err)
	_, err = ex.Command(ctx, out.CommandID)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	var us *commands.UnsupportedStoreError
	require.ErrorAs(t, err, &us)
	require.Equal(t, "Command", us.Op)
	require.Equal(t, "*memstore.Store", us.Store)
	require.EqualError(t, err, "pgdcb: commands: Command needs the PostgreSQL store's commands table (store is *memstore.Store)")
	_, _, err = ex.EventsOfCommand(ctx, out.CommandID)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = ex.CommandOfEvent(ctx, out.Events[0].Position)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

func TestNewRefusesANilStore(t *testing.T) {
	t.Parallel()
	_, err := commands.New(nil, nil)
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	var pg *eventstore.Store
	_, err = commands.New(pg, nil)
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
}
