package runstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
)

// The event store does not settle (Config.SettleDisabled): these tests are
// of AppendEvent's own retry through the idempotency key, which is what is
// left to it when the store's settle budget runs out (a server unreachable
// for longer); with settling on, the store answers these calls itself.
func outcomeStores(t *testing.T) (*eventstore.Store, *runstore.Store) {
	t.Helper()
	es, _ := teststore.New(t, &eventstore.Config{SettleDisabled: true})
	rs, err := runstore.New(es, nil)
	require.NoError(t, err)
	return es, rs
}

// holdRun opens a transaction holding the run's exclusive key (a conditional
// append on the run in flight): AppendEvent on the run waits for it.
func holdRun(t *testing.T, es *eventstore.Store, runID string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := es.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	_, err = es.AppendIfTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("Holder", 1, "holder=1")},
		appendif.FailIf(query.Tagged(nil, runstore.TagRunID+"="+runID), nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func runEvent(runID, key string) runstore.CanonicalEngineEvent {
	return runstore.CanonicalEngineEvent{RunID: runID, EventType: "StepCompleted", IdempotencyKey: key,
		EmittedAt: "2026-11-24T10:00:00Z", EventData: []byte(`{"ok":true}`)}
}

func runEvents(t *testing.T, rs *runstore.Store, runID string) []runstore.CanonicalEngineEvent {
	t.Helper()
	evs, err := rs.FetchEvents(context.Background(), runID, nil)
	require.NoError(t, err)
	return evs
}

// An append whose backend dies while it waits has an unknown outcome;
// AppendEvent retries it through the idempotency key and the event is stored
// once. Before the fix the connection error was returned as is.
func TestAppendEventRetriesAnUnknownOutcome(t *testing.T) {
	es, rs := outcomeStores(t)
	holder := holdRun(t, es, "r1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		res runstore.AppendResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := rs.AppendEvent(ctx, runEvent("r1", "k1"))
		done <- result{res, err}
	}()
	// Terminate the waiting backend once, then free the run.
	await.True(t, time.Minute, "the append waits on a lock", func() bool {
		var n int
		require.NoError(t, es.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '.append_events%'
			  AND pid <> pg_backend_pid()`, ident.Schema(es)).Scan(&n))
		return n > 0
	})
	require.NoError(t, holder.Rollback(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.True(t, r.res.Persisted)
	require.EqualValues(t, 1, r.res.RunSeq)
	require.Len(t, runEvents(t, rs, "r1"), 1)
}

// When the outcome cannot be settled before the context ends, the error
// matches pgdcb.ErrOutcomeUnknown; appending again settles it.
func TestAppendEventReportsAnUnsettledOutcome(t *testing.T) {
	es, rs := outcomeStores(t)
	holder := holdRun(t, es, "r2")
	// Long enough for the read of the run's last runSeq on a loaded machine:
	// the append then waits on the held key until the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := rs.AppendEvent(ctx, runEvent("r2", "k1"))
	require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown, "got %v", err)
	require.ErrorIs(t, err, runstore.ErrOutcomeUnknown, "runstore's own sentinel too")
	require.NoError(t, holder.Rollback(context.Background()))
	res, err := rs.AppendEvent(context.Background(), runEvent("r2", "k1"))
	require.NoError(t, err)
	require.EqualValues(t, 1, res.RunSeq)
	require.Len(t, runEvents(t, rs, "r2"), 1)
}
