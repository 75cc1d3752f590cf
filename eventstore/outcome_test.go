package eventstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

// holdBoundary opens a transaction holding the exclusive key of tag (a
// conditional append in flight on that boundary); appends to the tag wait
// for it.
func holdBoundary(t *testing.T, s *eventstore.Store, tag string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	_, err = s.AppendIfTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("Holder", 1, "holder=1")},
		appendif.FailIf(query.Tagged(nil, tag), nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func countTagged(t *testing.T, s *eventstore.Store, tag string) int {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), query.Tagged(nil, tag), nil)
	require.NoError(t, err)
	return len(evs)
}

// Without settling (Config.SettleDisabled), an append whose context ends
// while the server works on it has an unknown outcome: pgx closes the connection and sends a cancel request, which may
// land before or after the commit. Before the fix the error was a plain
// context error, which callers took for "nothing written". The retry of an
// idempotent append then settles it: exactly one event, whichever way the
// first call ended.
func TestAppendOutcomeUnknownWhenContextEndsMidCall(t *testing.T) {
	for _, conditional := range []bool{false, true} {
		t.Run(map[bool]string{false: "Append", true: "AppendIf"}[conditional], func(t *testing.T) {
			s, _ := newStore(t, &eventstore.Config{SettleDisabled: true}) // settled: TestSettleAbsentWhenContextEndsMidCall
			holder := holdBoundary(t, s, "acct=1")
			ev := pgdcb.MustEvent("Deposited", 1, "acct=1")
			ev.ID = uuid.New()
			appendOnce := func(ctx context.Context) error {
				if conditional {
					_, err := s.AppendIf(ctx, []pgdcb.Event{ev},
						appendif.FailIf(query.Tagged([]string{"Other"}, "acct=1"), nil).
							WithIdempotency(query.Tagged([]string{"Deposited"}, "acct=1")))
					return err
				}
				_, err := s.Append(ctx, []pgdcb.Event{ev})
				return err
			}

			// The append waits for the boundary's key while its context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := appendOnce(ctx)
			require.Error(t, err)
			require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown, "got %v", err)
			require.ErrorIs(t, err, context.DeadlineExceeded, "the cause is kept")
			var unknown *pgdcb.OutcomeUnknownError
			require.ErrorAs(t, err, &unknown)
			require.Equal(t, "append", unknown.Op)
			require.NotErrorIs(t, err, pgdcb.ErrConditionFailed)

			// Retrying is safe because the append is idempotent.
			require.NoError(t, holder.Rollback(context.Background()))
			err = appendOnce(context.Background())
			if err != nil {
				require.ErrorIs(t, err, pgdcb.ErrIdempotent)
			}
			require.Equal(t, 1, countTagged(t, s, "acct=1"))
		})
	}
}

// Without settling, a backend terminated while the append waits is reported
// as unknown too (FATAL errors are never taken as proof of a rollback).
func TestAppendOutcomeUnknownWhenBackendTerminated(t *testing.T) {
	s, pool := newStore(t, &eventstore.Config{SettleDisabled: true}) // settled: TestSettleResendsWhenBackendTerminated
	holdBoundary(t, s, "acct=2")
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, "acct=2")})
		done <- err
	}()
	// Find the waiting backend and terminate it.
	await.True(t, 30*time.Second, "the append waits on a lock", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '.append_events%'
			  AND pid <> pg_backend_pid()`, ident.Schema(s)).Scan(&n))
		return n > 0
	})
	err := <-done
	require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown, "got %v", err)
}

// Failures that certainly wrote nothing never match ErrOutcomeUnknown.
func TestAppendDefiniteFailuresAreNotUnknown(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, nil)
	ctx := context.Background()

	// A context that ended before the call: nothing was sent.
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := s.Append(done, []pgdcb.Event{pgdcb.MustEvent("E", 1, "a=1")})
	require.Error(t, err)
	require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
	require.ErrorIs(t, err, context.Canceled)

	// Server errors (the statement rolled back): a failed condition, a
	// duplicate event id.
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("E", 1, "a=1")})
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("E", 2, "a=1")}, appendif.FailIf(query.Tagged(nil, "a=1"), nil))
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)
	require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
	ev := pgdcb.MustEvent("E", 3, "a=2")
	ev.ID = uuid.New()
	_, err = s.Append(ctx, []pgdcb.Event{ev})
	require.NoError(t, err)
	_, err = s.Append(ctx, []pgdcb.Event{ev})
	require.ErrorIs(t, err, pgdcb.ErrIdempotent)
	require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown)

	// A server that cannot be reached: the connection fails before anything
	// is sent.
	cfg := s.Pool().Config().Copy()
	cfg.ConnConfig.Port = 1 // nothing listens there
	cfg.ConnConfig.ConnectTimeout = time.Second
	bad, err := eventstore.New(mustPool(t, cfg), &eventstore.Config{Schema: s.Schema()})
	require.NoError(t, err)
	_, err = bad.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("E", 1, "a=3")})
	require.Error(t, err)
	require.NotErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
}

// MarkOutcomeUnknown and CommitTx: a server ERROR is certain, anything else is not.
func TestMarkOutcomeUnknownClassifies(t *testing.T) {
	t.Parallel()
	require.NoError(t, eventstore.MarkOutcomeUnknown("commit", nil))
	certain := &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: pgcode.UniqueViolation}
	require.Same(t, error(certain), eventstore.MarkOutcomeUnknown("commit", certain))
	fatal := &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: pgcode.AdminShutdown}
	require.ErrorIs(t, eventstore.MarkOutcomeUnknown("commit", fatal), pgdcb.ErrOutcomeUnknown)
	require.ErrorIs(t, eventstore.MarkOutcomeUnknown("commit", fatal), fatal)
	eof := errors.New("unexpected EOF")
	err := eventstore.MarkOutcomeUnknown("commit", eof)
	require.ErrorIs(t, err, pgdcb.ErrOutcomeUnknown)
	require.ErrorIs(t, err, eof)
	require.Contains(t, err.Error(), "commit")

	s, _ := newStore(t, nil)
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = s.AppendTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("E", 1, "c=1")})
	require.NoError(t, err)
	require.NoError(t, eventstore.CommitTx(ctx, tx))
	require.Equal(t, 1, countTagged(t, s, "c=1"))
}

func mustPool(t *testing.T, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
