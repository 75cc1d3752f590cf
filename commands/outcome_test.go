package commands_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
)

// slowCommits makes every COMMIT of a command of type SlowCommit wait 2 s
// (a deferred trigger on the commands row), so a test can act while the
// executor's commit is in flight.
func slowCommits(t *testing.T, s *eventstore.Store) {
	t.Helper()
	ctx := context.Background()
	schema := ident.Schema(s)
	_, err := s.Pool().Exec(ctx, `CREATE FUNCTION `+schema+`.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.type = 'SlowCommit' THEN PERFORM pg_sleep(2); END IF; RETURN NULL; END $$`)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON `+schema+`.commands
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION `+schema+`.slow_commit()`)
	require.NoError(t, err)
}

// terminateCommitting kills, once, the backend that is committing a command
// of this schema (sleeping in the deferred trigger). It returns how many it
// killed when the context ends.
func terminateCommitting(ctx context.Context, s *eventstore.Store) <-chan int {
	done := make(chan int, 1)
	go func() {
		for {
			var n int
			err := s.Pool().QueryRow(context.WithoutCancel(ctx), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event = 'PgSleep' AND lower(query) = 'commit'
				  AND pid <> pg_backend_pid()`).Scan(&n)
			if err == nil && n > 0 {
				done <- n
				return
			}
			select {
			case <-ctx.Done():
				done <- 0
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return done
}

// A commit whose connection is lost has an unknown outcome; the executor
// retries it through the command id, and the command's events are stored
// once, as this call's own outcome (not a duplicate). Before the fix the
// executor returned the raw connection error.
func TestExecuteRetriesAnUnknownCommitThroughItsID(t *testing.T) {
	ex, s := newExecutor(t, &commands.Config{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	slowCommits(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	killed := terminateCommitting(ctx, s)

	c := cmd("SlowCommit", increment("u1", 100))
	c.ID = uuid.New()
	out, err := ex.Execute(ctx, c)
	require.NoError(t, err, "the unknown commit is settled by a retry")
	require.Equal(t, 1, <-killed, "the first commit was interrupted")
	require.False(t, out.Duplicate, "the outcome is this call's own")
	require.GreaterOrEqual(t, out.Attempts, 2)
	require.Len(t, out.Events, 1)
	require.Equal(t, 1, countEvents(t, s, counterQuery("u1")), "stored once")
}

// When the retries cannot settle it (the context ends while the commit is in
// flight), the error says the outcome is unknown; executing the same command
// id again settles it, and the events are stored once.
func TestExecuteReportsAnUnsettledOutcome(t *testing.T) {
	ex, s := newExecutor(t, nil)
	slowCommits(t, s)
	c := cmd("SlowCommit", increment("u2", 100))
	c.ID = uuid.New()
	// Long enough to reach the COMMIT on a loaded machine, shorter than the
	// commit's 2 s.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := ex.Execute(ctx, c)
	require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown, "got %v", err)
	require.Contains(t, err.Error(), c.ID.String(), "the error names the command id to retry with")

	out, err := ex.Execute(context.Background(), c)
	require.NoError(t, err)
	require.Len(t, out.Events, 1)
	require.Equal(t, 1, countEvents(t, s, counterQuery("u2")))
}

// A store failure inside Decide is not a business rejection: it comes back
// as itself (matching its cause), never as a *RejectedError. Before the fix
// every Decide error became a *RejectedError.
func TestDecideInfrastructureErrorsAreNotRejections(t *testing.T) {
	t.Parallel()
	ex, _ := newExecutor(t, nil)
	var calls atomic.Int32
	readFails := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		calls.Add(1)
		gone, cancel := context.WithCancel(ctx)
		cancel() // the read's own context has ended: the store fails it
		if _, _, err := dc.ReadAll(gone, counterQuery("x"), nil); err != nil {
			return nil, appendif.Condition{}, fmt.Errorf("load counter: %w", err)
		}
		return nil, appendif.Condition{}, errors.New("unreachable")
	})
	_, err := ex.Execute(context.Background(), cmd("Inc", readFails))
	require.Error(t, err)
	var rej *commands.RejectedError
	require.False(t, errors.As(err, &rej), "a failed read is not a rejection: %v", err)
	require.ErrorIs(t, err, context.Canceled)

	// A handler's own I/O failing (connection-level errors) is not a
	// rejection either.
	ioFails := commands.HandlerFunc(func(context.Context, *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		return nil, appendif.Condition{}, fmt.Errorf("call pricing service: %w", io.ErrUnexpectedEOF)
	})
	_, err = ex.Execute(context.Background(), cmd("Inc", ioFails))
	require.False(t, errors.As(err, &rej), "an I/O failure is not a rejection: %v", err)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)

	// A business rule still is.
	_, err = ex.Execute(context.Background(), cmd("Inc", increment("full", 0)))
	require.ErrorAs(t, err, &rej)
	require.ErrorIs(t, err, errLimit)
}
