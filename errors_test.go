package pgdcb_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
	"github.com/pgdcb/pgdcb/tags"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// requireOnePrefix asserts the error convention (docs/CONVENTIONS.md): the
// message starts with "pgdcb: ", says it once, and repeats no segment of
// context right after itself.
func requireOnePrefix(t *testing.T, name string, err error, sentinel error) {
	t.Helper()
	require.Error(t, err, name)
	if sentinel != nil {
		require.ErrorIs(t, err, sentinel, name)
	}
	msg := err.Error()
	t.Logf("%s: %s", name, msg)
	assert.True(t, strings.HasPrefix(msg, "pgdcb: "), "%s: %q does not start with the prefix", name, msg)
	assert.Equal(t, 1, strings.Count(msg, "pgdcb:"), "%s: %q says pgdcb more than once", name, msg)
	parts := strings.Split(msg, ": ")
	for i := 1; i < len(parts); i++ {
		assert.NotEqual(t, parts[i-1], parts[i], "%s: %q repeats %q", name, msg, parts[i])
	}
}

// The main errors of the library, provoked as a user meets them, each with
// one "pgdcb: " prefix and no context repeated. Before the convention:
// "pgdcb: append: pgdcb: operation already applied: …", "pgdcb: append:
// pgdcb: schema not migrated: …", "pgdcb: migrate runstore: pgdcb: schema
// not migrated: …", "commands: …: pgdcb: append: pgdcb: append condition
// failed: …".
func TestErrorsHaveOnePrefix(t *testing.T) {
	ctx := context.Background()
	es := pgdcbtest.NewStore(t, &pgdcbtest.Options{OwnPool: true})
	pool := es.Pool()
	ev := func(tg ...string) pgdcb.Event {
		return pgdcb.MustEvent("Happened", map[string]int{"n": 1}, tg...)
	}

	// Appends.
	withID := ev("k=1")
	withID.ID = uuid.New()
	_, err := es.Append(ctx, []pgdcb.Event{withID})
	require.NoError(t, err)
	_, err = es.Append(ctx, []pgdcb.Event{withID})
	requireOnePrefix(t, "duplicate event id", err, pgdcb.ErrIdempotent)

	idem := appendif.Condition{Idempotency: query.Tagged(nil, "k=1")}
	_, err = es.AppendIf(ctx, []pgdcb.Event{ev("k=1")}, idem)
	requireOnePrefix(t, "idempotency query", err, pgdcb.ErrIdempotent)

	_, err = es.AppendIf(ctx, []pgdcb.Event{ev("k=2")}, appendif.FailIf(query.Tagged(nil, "k=1"), &cursor.Start))
	requireOnePrefix(t, "condition failed", err, pgdcb.ErrConditionFailed)

	_, err = es.Append(ctx, []pgdcb.Event{{Type: "", Data: []byte(`{}`)}})
	requireOnePrefix(t, "invalid event", err, pgdcb.ErrInvalidEvent)

	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	_, err = es.AppendTx(ctx, tx, []pgdcb.Event{ev("k=3")})
	requireOnePrefix(t, "transaction state", err, pgdcb.ErrTransactionState)
	require.NoError(t, tx.Rollback(ctx))

	_, err = es.ReadTail(ctx, query.All(), cursor.Start, -1)
	requireOnePrefix(t, "negative limit", err, pgdcb.ErrInvalidArgument)

	_, err = tags.Parse("Not A Tag")
	requireOnePrefix(t, "invalid tag", err, pgdcb.ErrInvalidTag)

	_, err = cursor.Parse("%%%")
	requireOnePrefix(t, "invalid cursor", err, pgdcb.ErrInvalidCursor)

	// A store over a schema that was never migrated.
	bare, err := eventstore.New(pool, &eventstore.Config{Schema: pgtest.Schema(t)})
	require.NoError(t, err)
	_, err = bare.Append(ctx, []pgdcb.Event{ev("k=1")})
	requireOnePrefix(t, "append, not migrated", err, pgdcb.ErrNotMigrated)
	_, _, err = bare.ReadAll(ctx, query.All(), nil)
	requireOnePrefix(t, "read, not migrated", err, pgdcb.ErrNotMigrated)
	_, err = runstore.Migrate(ctx, pool, bare.Schema())
	requireOnePrefix(t, "runstore migrate, core not migrated", err, pgdcb.ErrNotMigrated)
	_, err = pgdcbsql.Migrate(ctx, pool, "Not A Schema")
	requireOnePrefix(t, "migrate, invalid schema", err, pgdcb.ErrInvalidSchema)

	// Projections.
	_, err = projection.New(es, "p", query.All(), func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error { return nil },
		&projection.Config{BatchSize: -1})
	requireOnePrefix(t, "projection config", err, pgdcb.ErrInvalidArgument)
	_, err = projection.GetStatus(ctx, es, "never-ran")
	requireOnePrefix(t, "projection status", err, pgdcb.ErrNotFound)

	// runstore.
	_, err = runstore.Migrate(ctx, pool, es.Schema())
	require.NoError(t, err)
	rs, err := runstore.New(es, nil)
	require.NoError(t, err)
	_, err = rs.FetchEvents(ctx, "", nil)
	requireOnePrefix(t, "runstore invalid input", err, runstore.ErrInvalidInput)
	require.NoError(t, rs.Projector().Pause(ctx))
	requireOnePrefix(t, "runstore catch up, paused", rs.CatchUp(ctx), projection.ErrNotActive)

	// Commands.
	ex, err := commands.New(es, &commands.Config{MaxAttempts: 2})
	require.NoError(t, err)
	_, err = ex.Execute(ctx, commands.Command{Type: "Nothing"})
	requireOnePrefix(t, "command without handler", err, commands.ErrNoHandler)
	conflict := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		return []pgdcb.Event{ev("k=9")}, appendif.FailIf(query.Tagged(nil, "k=1"), &cursor.Start), nil
	})
	_, err = ex.Execute(ctx, commands.Command{Type: "Conflict", Handler: conflict})
	requireOnePrefix(t, "command attempts exhausted", err, pgdcb.ErrConditionFailed)
	_, err = ex.Execute(ctx, commands.Command{Type: "Reject", Handler: commands.HandlerFunc(
		func(context.Context, *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
			return nil, appendif.Condition{}, errors.New("insufficient funds")
		})})
	requireOnePrefix(t, "command rejected", err, nil)

	// Effects.
	q, err := effects.New(es, nil)
	require.NoError(t, err)
	_, err = q.Effect(ctx, "nope")
	requireOnePrefix(t, "effect not found", err, pgdcb.ErrNotFound)
}
