package eventstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
	"github.com/pgdcb/pgdcb/tags"
)

func requireNoEvents(t *testing.T, s *eventstore.Store) {
	t.Helper()
	require.Zero(t, countEvents(t, s, query.All()), "a refused append must leave no event behind")
}

func TestBadInputIsRefusedAndNothingWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, &eventstore.Config{MaxBatchSize: 3})
	good := pgdcb.MustEvent("Ok", 1, "k=v")
	cases := []struct {
		name   string
		events []pgdcb.Event
		want   error
		names  string
	}{
		{"empty batch", nil, pgdcb.ErrInvalidEvent, "no events"},
		{"over max", []pgdcb.Event{good, good, good, good}, pgdcb.ErrInvalidEvent, "MaxBatchSize 3"},
		{"empty type", []pgdcb.Event{good, {Type: "", Data: json.RawMessage(`{}`)}}, pgdcb.ErrInvalidEvent, "event 1"},
		{"long type", []pgdcb.Event{{Type: strings.Repeat("t", 65), Data: json.RawMessage(`{}`)}}, pgdcb.ErrInvalidEvent, "longer than 64"},
		{"data not JSON", []pgdcb.Event{good, {Type: "X", Data: json.RawMessage(`{nope`)}}, pgdcb.ErrInvalidEvent, `event 1 (type "X"): data: not valid JSON`},
		{"no data", []pgdcb.Event{{Type: "X"}}, pgdcb.ErrInvalidEvent, "data: empty"},
		{"metadata not JSON", []pgdcb.Event{{Type: "X", Data: json.RawMessage(`1`), Metadata: json.RawMessage(`[`)}}, pgdcb.ErrInvalidEvent, "metadata"},
		{"NUL escape jsonb refuses", []pgdcb.Event{good, {Type: "X", Data: json.RawMessage(`"\u0000"`)}}, pgdcb.ErrInvalidEvent, `data: not valid JSON for PostgreSQL's jsonb: \u0000 escape`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Append(ctx, c.events)
			require.ErrorIs(t, err, c.want)
			require.Contains(t, err.Error(), c.names)
			requireNoEvents(t, s)
		})
	}
}

func TestBadTagsAndQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	for _, bad := range [][]string{{"no-equals"}, {"=v"}, {"Upper=v"}, {"k=1", "k=2"}} {
		t.Run(strings.Join(bad, ","), func(t *testing.T) {
			_, err := pgdcb.NewEvent("X", 1, bad...)
			require.ErrorIs(t, err, pgdcb.ErrInvalidTag, "%v", bad)
			var te *tags.InvalidTagError
			require.ErrorAs(t, err, &te)
		})
	}
	// A condition must have something to check.
	_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1)}, appendif.Condition{})
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	cur, err := s.Head(ctx)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1)},
		appendif.Condition{After: &cur, Idempotency: query.Tagged(nil, "a=b")})
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1)},
		appendif.FailIf(query.New(query.Item{Types: []string{""}}), nil))
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	require.Contains(t, err.Error(), "item 0")
	_, _, err = s.ReadAll(ctx, query.New(query.Item{Types: []string{strings.Repeat("x", 70)}}), nil)
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	_, err = cursor.Parse("%%%")
	require.ErrorIs(t, err, pgdcb.ErrInvalidCursor)
	requireNoEvents(t, s)
}

func TestBadSchemaName(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, name := range []string{`a"b`, "has space", "Upper", "1abc", strings.Repeat("s", 64), "x;drop"} {
		t.Run(name, func(t *testing.T) {
			_, err := eventstore.New(pool, &eventstore.Config{Schema: name})
			require.ErrorIs(t, err, pgdcb.ErrInvalidSchema, name)
			var se *pgdcbsql.InvalidSchemaError
			require.ErrorAs(t, err, &se)
			require.Equal(t, name, se.Name)
			_, err = pgdcbsql.Migrate(context.Background(), pool, name)
			require.ErrorIs(t, err, pgdcb.ErrInvalidSchema, name)
		})
	}
}

func TestEventIDMakesRetriesIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	e := pgdcb.MustEvent("Paid", 10, "invoice=1")
	e.ID = uuid.New()
	_, err := s.Append(ctx, []pgdcb.Event{e})
	require.NoError(t, err)
	other := pgdcb.MustEvent("Other", 1)
	_, err = s.Append(ctx, []pgdcb.Event{other, e})
	require.ErrorIs(t, err, pgdcb.ErrIdempotent)
	var ie *appendif.IdempotentError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, e.ID.String(), ie.EventID)
	require.Equal(t, 1, countEvents(t, s, query.All()), "the whole retried batch was refused")

	evs, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Equal(t, e.ID, evs[0].ID)
	require.JSONEq(t, "10", string(evs[0].Data))
}

func TestTransactionRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	ev := []pgdcb.Event{pgdcb.MustEvent("X", 1, "k=v")}

	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
			require.NoError(t, err)
			_, err = s.AppendTx(ctx, tx, ev)
			require.ErrorIs(t, err, pgdcb.ErrTransactionState, iso)
			require.Contains(t, err.Error(), "READ COMMITTED")
			require.NoError(t, tx.Rollback(ctx))
		})
	}

	// Not the first write.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "CREATE TEMP TABLE scratch (x int); INSERT INTO scratch VALUES (1)")
	require.NoError(t, err)
	_, err = s.AppendTx(ctx, tx, ev)
	require.ErrorIs(t, err, pgdcb.ErrTransactionState)
	require.Contains(t, err.Error(), "first write")
	require.NoError(t, tx.Rollback(ctx))

	// Two appends in one transaction.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = s.AppendTx(ctx, tx, ev)
	require.NoError(t, err)
	_, err = s.AppendTx(ctx, tx, ev)
	require.ErrorIs(t, err, pgdcb.ErrTransactionState)
	require.NoError(t, tx.Rollback(ctx))
	requireNoEvents(t, s)

	// Append first, then other writes, in one transaction: fine.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	res, err := s.AppendTx(ctx, tx, ev)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "CREATE TEMP TABLE scratch2 (x int); INSERT INTO scratch2 VALUES (1)")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, res.Positions, 1)
}

func TestAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	_, err := s.Append(ctx, []pgdcb.Event{
		pgdcb.MustEvent("X", 1, "run_id=r1"), pgdcb.MustEvent("X", 2, "run_id=r2"),
	})
	require.NoError(t, err)
	tbl := ident.Schema(s) + ".events"
	for _, stmt := range []string{
		"UPDATE " + tbl + " SET data = '3'",
		"DELETE FROM " + tbl,
		"TRUNCATE " + tbl,
	} {
		t.Run(strings.Fields(stmt)[0], func(t *testing.T) {
			_, err := pool.Exec(ctx, stmt)
			require.Error(t, err, stmt)
			require.Contains(t, err.Error(), "append-only", stmt)
		})
	}
	require.Equal(t, 2, countEvents(t, s, query.All()))

	// The retention function deletes one tag's events, and only inside itself.
	var n int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT "+ident.Schema(s)+".delete_events_tagged('run_id=r1')").Scan(&n))
	require.EqualValues(t, 1, n)
	require.Equal(t, 1, countEvents(t, s, query.All()))
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	require.NoError(t, tx.QueryRow(ctx, "SELECT "+ident.Schema(s)+".delete_events_tagged('run_id=none')").Scan(&n))
	_, err = tx.Exec(ctx, "DELETE FROM "+tbl)
	require.Error(t, err, "delete must be refused again after the retention function returns")
}
