package commands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/query"
)

// The executor appends the command's events tagged with its id, and the
// outcome holds them as stored. On PostgreSQL the command is recorded too,
// and traced both ways.
func TestExecuteAppendsAndRecordsTheCommand(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ex, s := b.newExecutor(t, nil)
		id := uuid.New()
		c := cmd("Increment", increment("a", 10))
		c.ID = id
		c.Metadata = json.RawMessage(`{"user":"u1"}`)
		out, err := ex.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, id, out.CommandID)
		require.Equal(t, 1, out.Attempts)
		require.False(t, out.Duplicate)
		require.Len(t, out.Events, 1)
		v, ok := out.Events[0].Tags.Get(commands.CommandIDTagKey)
		require.True(t, ok)
		require.Equal(t, id.String(), v)
		require.Equal(t, out.TransactionID, out.Events[0].TransactionID)
		if !b.postgres {
			// Only here can the events compare whole: PostgreSQL reads the
			// data back in jsonb's spelling.
			stored, _, err := s.ReadAll(ctx, query.All(), nil)
			require.NoError(t, err)
			require.Equal(t, stored, out.Events, "the outcome holds the events as stored (OccurredAt too)")
			return // tracing needs the commands table: TestMemExecuteTracingNeedsPostgres
		}

		// Tracing both ways.
		rec, evs, err := ex.EventsOfCommand(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "Increment", rec.Type)
		require.JSONEq(t, `{"t":"Increment"}`, string(rec.Data))
		require.JSONEq(t, `{"user":"u1"}`, string(rec.Metadata))
		require.Equal(t, out.TransactionID, rec.TransactionID)
		require.Len(t, evs, 1)
		require.Equal(t, out.Events[0].Position, evs[0].Position)
		require.Equal(t, out.Events[0].Tags.Strings(), evs[0].Tags.Strings())

		rec2, err := ex.CommandOfEvent(ctx, evs[0].Position)
		require.NoError(t, err)
		require.Equal(t, id, rec2.CommandID)

		_, err = ex.CommandOfEvent(ctx, evs[0].Position+1000)
		require.ErrorIs(t, err, commands.ErrCommandNotFound)
		_, _, err = ex.EventsOfCommand(ctx, uuid.New())
		require.ErrorIs(t, err, commands.ErrCommandNotFound)

		// An event appended outside the executor has no command.
		res, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", map[string]int{}, "x=1")})
		require.NoError(t, err)
		_, err = ex.CommandOfEvent(ctx, res.Positions[0])
		require.ErrorIs(t, err, commands.ErrCommandNotFound)
	})
}

func TestExecuteAssignsAnIDWhenNoneGiven(t *testing.T) {
	t.Parallel()
	ex, _ := newExecutor(t, nil)
	out, err := ex.Execute(context.Background(), cmd("Increment", increment("a", 10)))
	require.NoError(t, err)
	require.NotEqual(t, uuid.Nil, out.CommandID)
	_, err = ex.Command(context.Background(), out.CommandID)
	require.NoError(t, err)
}

// conflicting returns a handler that decides like increment, then, on the
// attempts listed, appends a conflicting event from another transaction before
// returning its decision, so the executor's append must fail its condition.
func conflicting(s pgdcb.Store, id string, conflictOn func(attempt int) bool, calls *atomic.Int32) commands.HandlerFunc {
	inc := increment(id, 1000)
	return func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		calls.Add(1)
		evs, cond, err := inc(ctx, dc)
		if err == nil && conflictOn(dc.Attempt) {
			_, aerr := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Incremented", map[string]int{}, "counter="+id)})
			if aerr != nil {
				return nil, cond, aerr
			}
		}
		return evs, cond, err
	}
}

func TestExecuteRetriesOnConflict(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ex, s := b.newExecutor(t, &commands.Config{RetryMin: 1, RetryMax: 1})
		var calls atomic.Int32
		out, err := ex.Execute(ctx, cmd("Increment", conflicting(s, "a", func(a int) bool { return a <= 2 }, &calls)))
		require.NoError(t, err)
		require.Equal(t, 3, out.Attempts)
		require.EqualValues(t, 3, calls.Load())
		// Two injected events + the command's one, which decided on the state after them.
		evs, _, err := s.ReadAll(ctx, counterQuery("a"), nil)
		require.NoError(t, err)
		require.Len(t, evs, 3)
		require.JSONEq(t, `{"n":3}`, string(evs[2].Data))
		st := ex.Stats()
		require.EqualValues(t, 2, st.Conflicts)
		require.EqualValues(t, 2, st.Retries)
		require.EqualValues(t, 1, st.Executed)
	})
}

func TestExecuteGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ex, s := b.newExecutor(t, &commands.Config{MaxAttempts: 3, RetryMin: 1, RetryMax: 1})
		var calls atomic.Int32
		id := uuid.New()
		c := cmd("Increment", conflicting(s, "a", func(int) bool { return true }, &calls))
		c.ID = id
		_, err := ex.Execute(ctx, c)
		require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
		var ex3 *commands.AttemptsExhaustedError
		require.ErrorAs(t, err, &ex3)
		require.Equal(t, 3, ex3.Attempts)
		require.Contains(t, err.Error(), "3 attempts")
		var cf *appendif.ConditionFailedError
		require.ErrorAs(t, err, &cf)
		require.EqualValues(t, 3, calls.Load())
		// Only the three injected events: the command appended nothing, recorded nothing.
		require.Equal(t, 3, countEvents(t, s, counterQuery("a")), "only the injected events")
		if b.postgres {
			_, err = ex.Command(ctx, id)
			require.ErrorIs(t, err, commands.ErrCommandNotFound)
		}
		require.EqualValues(t, 1, ex.Stats().Exhausted)
	})
}

func TestExecuteNeverRetriesARejection(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ex, s := b.newExecutor(t, nil)
		var calls atomic.Int32
		h := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
			calls.Add(1)
			return increment("a", 0)(ctx, dc)
		})
		c := cmd("Increment", h)
		c.ID = uuid.New()
		out, err := ex.Execute(ctx, c)
		require.ErrorIs(t, err, errLimit)
		var rej *commands.RejectedError
		require.ErrorAs(t, err, &rej)
		require.EqualValues(t, 1, calls.Load())
		// The outcome of a rejection says how many decisions were made.
		require.Equal(t, commands.Outcome{CommandID: c.ID, Attempts: 1}, out)
		require.Equal(t, 0, countEvents(t, s, query.All()))
		require.EqualValues(t, 1, ex.Stats().Rejected)
	})
}

func TestExecuteSameIDTwiceReturnsTheFirstOutcome(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ex, s := b.newExecutor(t, nil)
		id := uuid.New()
		c := cmd("Increment", increment("a", 10))
		c.ID = id
		first, err := ex.Execute(ctx, c)
		require.NoError(t, err)
		second, err := ex.Execute(ctx, c)
		require.NoError(t, err)
		require.True(t, second.Duplicate)
		require.Equal(t, first.TransactionID, second.TransactionID)
		require.Equal(t, first.Events[0].Position, second.Events[0].Position)
		require.Equal(t, 1, countEvents(t, s, query.All()))
		require.EqualValues(t, 1, ex.Stats().Idempotent)
	})
}

// A command whose retry is rejected by the state its first run created (open a
// thing that must not exist) still answers with the first outcome, and so
// does the same id with another handler (one that would append).
func TestExecuteDuplicateWhoseRetryWouldBeRejected(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ex, s := b.newExecutor(t, nil)
		c := cmd("Increment", increment("a", 1)) // a retry would be rejected: limit reached
		c.ID = uuid.New()
		first, err := ex.Execute(ctx, c)
		require.NoError(t, err)
		second, err := ex.Execute(ctx, c)
		require.NoError(t, err)
		require.True(t, second.Duplicate)
		require.Zero(t, second.Attempts)
		require.Equal(t, first.TransactionID, second.TransactionID)
		if !b.postgres { // PostgreSQL reads the first outcome's events back, in jsonb's spelling
			require.Equal(t, first.Events, second.Events)
		}
		require.Equal(t, 1, countEvents(t, s, query.All()))
		require.EqualValues(t, 1, ex.Stats().Idempotent)

		// Another handler for the same id (it would append): still the first outcome.
		c.Handler = increment("a", 10)
		third, err := ex.Execute(ctx, c)
		require.NoError(t, err)
		require.True(t, third.Duplicate)
		require.Equal(t, 1, countEvents(t, s, query.All()))

		// A different id is rejected.
		_, err = ex.Execute(ctx, cmd("Increment", increment("a", 1)))
		require.ErrorIs(t, err, errLimit)
	})
}

func TestExecuteSameIDConcurrently(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ex, s := b.newExecutor(t, &commands.Config{RetryMin: 1, RetryMax: 1})
		const n = 8
		rounds := 50
		if b.postgres {
			rounds = 25
		}
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
	})
}

func noop(calls *atomic.Int32) commands.HandlerFunc {
	return func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		if calls != nil {
			calls.Add(1)
		}
		return nil, appendif.Condition{}, nil
	}
}

func TestExecuteZeroEventsIsRecordedAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex, s := newExecutor(t, nil)
	c := cmd("Noop", noop(nil))
	c.ID = uuid.New()
	out, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	require.Empty(t, out.Events)
	require.NotZero(t, out.TransactionID)
	rec, evs, err := ex.EventsOfCommand(ctx, c.ID)
	require.NoError(t, err)
	require.Empty(t, evs)
	require.Equal(t, out.TransactionID, rec.TransactionID)

	again, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, out.TransactionID, again.TransactionID)

	// Concurrently: exactly one is fresh.
	for r := range 10 {
		c := cmd("Noop", noop(nil))
		c.ID = uuid.New()
		var fresh atomic.Int32
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				o, err := ex.Execute(ctx, c)
				if err != nil {
					t.Errorf("round %d: %v", r, err)
					return
				}
				if !o.Duplicate {
					fresh.Add(1)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, fresh.Load(), "round %d", r)
	}
	require.Equal(t, 0, countEvents(t, s, query.All()))
}

// The UNIQUE command_id backstop: a duplicate that decides events after a first
// run that decided none appends nothing.
func TestExecuteDuplicateOfZeroEventCommandAppendsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex, s := newExecutor(t, nil)
	id := uuid.New()
	c := cmd("Maybe", noop(nil))
	c.ID = id
	_, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	c.Handler = increment("a", 10)
	out, err := ex.Execute(ctx, c)
	require.NoError(t, err)
	require.True(t, out.Duplicate)
	require.Empty(t, out.Events)
	require.Equal(t, 0, countEvents(t, s, query.All()))
}

func TestExecuteRefusesInvalidCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex, s := newExecutor(t, nil)
	_, err := ex.Execute(ctx, commands.Command{Type: "", Handler: noop(nil)})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	_, err = ex.Execute(ctx, commands.Command{Type: strings.Repeat("x", 65), Handler: noop(nil)})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	_, err = ex.Execute(ctx, commands.Command{Type: "T", Data: json.RawMessage(`{`), Handler: noop(nil)})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	_, err = ex.Execute(ctx, commands.Command{Type: "T", Metadata: json.RawMessage(`nope`), Handler: noop(nil)})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	_, err = ex.Execute(ctx, commands.Command{Type: "Unknown"})
	require.ErrorIs(t, err, commands.ErrNoHandler)

	// An event that already carries another command_id tag.
	bad := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		return []pgdcb.Event{pgdcb.MustEvent("E", map[string]int{}, "command_id=other")}, appendif.Condition{}, nil
	})
	_, err = ex.Execute(ctx, cmd("Bad", bad))
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	// An invalid event from the handler: the store's error, nothing written.
	inv := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		return []pgdcb.Event{{Type: "", Data: json.RawMessage(`{}`)}}, appendif.Condition{}, nil
	})
	_, err = ex.Execute(ctx, cmd("Inv", inv))
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
	require.Equal(t, 0, countEvents(t, s, query.All()))
	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+ident.Schema(s)+`.commands`).Scan(&n))
	require.Zero(t, n)
}

func TestRegisteredHandlers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex, _ := newExecutor(t, nil)
	require.ErrorIs(t, ex.Register("", noop(nil)), commands.ErrInvalidCommand)
	require.NoError(t, ex.Register("Increment", increment("r", 5)))
	out, err := ex.Execute(ctx, commands.Command{Type: "Increment"})
	require.NoError(t, err)
	require.Len(t, out.Events, 1)
	rec, err := ex.Command(ctx, out.CommandID)
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(rec.Data))
}
