package commands_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/query"
)

// The executor on a store other than PostgreSQL (memstore): the same
// Execute semantics without the commands table.

func newMemExecutor(t testing.TB, cfg *commands.Config) (*commands.Executor, *memstore.Store) {
	t.Helper()
	s := memstore.MustNew(nil)
	ex, err := commands.New(s, cfg)
	require.NoError(t, err)
	return ex, s
}

func TestMemExecuteAppendsTaggedEvents(t *testing.T) {
	ctx := context.Background()
	ex, s := newMemExecutor(t, nil)
	require.Same(t, s, ex.Store())
	id := uuid.New()
	c := cmd("Increment", increment("a", 10))
	c.ID = id
	out, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, id, out.CommandID)
	require.Equal(t, 1, out.Attempts)
	require.False(t, out.Duplicate)
	require.Len(t, out.Events, 1)
	evs, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Equal(t, evs, out.Events, "the outcome holds the events as stored (OccurredAt too)")
	v, _ := evs[0].Tags.Get(commands.CommandIDTagKey)
	require.Equal(t, id.String(), v)
	require.Equal(t, evs[0].TransactionID, out.TransactionID)
}

func TestMemExecuteRetriesOnConflictAndGivesUp(t *testing.T) {
	ctx := context.Background()
	ex, s := newMemExecutor(t, &commands.Config{MaxAttempts: 4, BackoffBase: 1, BackoffMax: 1})
	var calls atomic.Int32
	out, err := ex.Execute(ctx, cmd("Increment", conflicting(s, "a", func(a int) bool { return a <= 2 }, &calls)))
	require.NoError(t, err)
	require.Equal(t, 3, out.Attempts)
	require.EqualValues(t, 3, calls.Load())
	evs, _, err := s.ReadAll(ctx, counterQuery("a"), nil)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.JSONEq(t, `{"n":3}`, string(evs[2].Data))

	calls.Store(0)
	_, err = ex.Execute(ctx, cmd("Increment", conflicting(s, "b", func(int) bool { return true }, &calls)))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	var exh *commands.AttemptsExhaustedError
	require.ErrorAs(t, err, &exh)
	require.Equal(t, 4, exh.Attempts)
	var cf *appendif.ConditionFailedError
	require.ErrorAs(t, err, &cf)
	require.Equal(t, 4, countEvents(t, s, counterQuery("b")), "only the injected events")
}

func TestMemExecuteRejectionIsNotRetried(t *testing.T) {
	ex, s := newMemExecutor(t, nil)
	_, err := ex.Execute(context.Background(), cmd("Increment", increment("a", 0)))
	require.ErrorIs(t, err, errLimit)
	var rej *commands.RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 0, countEvents(t, s, query.All()))
}

func TestMemExecuteSameIDReturnsTheFirstOutcome(t *testing.T) {
	ctx := context.Background()
	ex, s := newMemExecutor(t, nil)
	c := cmd("Increment", increment("a", 1)) // a retry would be rejected: limit reached
	c.ID = uuid.New()
	first, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	second, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, second.Duplicate)
	require.Zero(t, second.Attempts)
	require.Equal(t, first.TransactionID, second.TransactionID)
	require.Equal(t, first.Events, second.Events)
	require.Equal(t, 1, countEvents(t, s, query.All()))
	require.EqualValues(t, 1, ex.Stats().Idempotent)

	// Another handler for the same id (it would append): still the first outcome.
	c.Handler = increment("a", 10)
	third, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, third.Duplicate)
	require.Equal(t, 1, countEvents(t, s, query.All()))
}

func TestMemExecuteSameIDConcurrently(t *testing.T) {
	ctx := context.Background()
	ex, s := newMemExecutor(t, &commands.Config{BackoffBase: 1, BackoffMax: 1})
	const rounds, n = 50, 8
	for r := range rounds {
		id := uuid.New()
		counter := fmt.Sprint("c", r)
		outs := make([]commands.Outcome, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				c := cmd("Increment", increment(counter, 1000))
				c.ID = id
				outs[i], errs[i] = ex.Execute(ctx, c)
			})
		}
		close(start)
		wg.Wait()
		fresh := 0
		for i := range n {
			require.NoError(t, errs[i], "round %d", r)
			if !outs[i].Duplicate {
				fresh++
			}
			require.Equal(t, outs[0].TransactionID, outs[i].TransactionID)
			require.Len(t, outs[i].Events, 1)
		}
		require.Equal(t, 1, fresh, "round %d: exactly one execution commits", r)
		require.Equal(t, 1, countEvents(t, s, counterQuery(counter)), "round %d", r)
	}
}

// The documented difference: without a commands table, a command that
// decides no events leaves nothing behind, so its id is not remembered.
func TestMemExecuteZeroEventsIsNotRecorded(t *testing.T) {
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
	require.EqualError(t, err, "commands: Command needs the PostgreSQL store's commands table (store is *memstore.Store)")
	_, _, err = ex.EventsOfCommand(ctx, out.CommandID)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = ex.CommandOfEvent(ctx, out.Events[0].Position)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

func TestNewRefusesANilStore(t *testing.T) {
	_, err := commands.New(nil, nil)
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	var pg *eventstore.Store
	_, err = commands.New(pg, nil)
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
}
