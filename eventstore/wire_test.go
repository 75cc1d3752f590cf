package eventstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// The store writes its append calls in binary format itself (wire.go) and
// sends them by pgconn: on a pool that caches prepared statements (pgx's
// default) as a statement prepared once per connection, on any other as a
// parse of its own per call. Under every exec mode, with group commit on
// and off, each field of the events comes back as written, each part of a
// condition (idempotency and fail-if items with types and tags, a cursor)
// answers as documented, and the pool's statement tracer sees the calls.
func TestAppendCallsUnderEveryExecMode(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		for _, grouped := range []bool{true, false} {
			name := mode.String()
			if !grouped {
				name += "/no-group"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
				require.NoError(t, err)
				cfg.MaxConns = 4
				cfg.ConnConfig.DefaultQueryExecMode = mode
				rec := &appendRecorder{}
				cfg.ConnConfig.Tracer = rec
				pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
				require.NoError(t, err)
				t.Cleanup(pool.Close)
				s := teststore.OnPool(t, pool, &eventstore.Config{GroupCommitDisabled: !grouped})
				checkAppendCalls(t, s)
				rec.mu.Lock()
				defer rec.mu.Unlock()
				require.NotZero(t, rec.calls, "the pool's tracer saw no append call")
				require.NotZero(t, rec.ended, "the pool's tracer saw no append call end")
			})
		}
	}
}

func checkAppendCalls(t *testing.T, s *eventstore.Store) {
	ctx := t.Context()
	id := uuid.New()
	batch := []pgdcb.Event{
		{Type: "Opened", Tags: tags.MustParseSet("acct=a", "owner=o1"), Data: json.RawMessage(`{"n":1,"s":"\"quoted\" ü"}`),
			Metadata: json.RawMessage(`{"corr":"c1"}`)},
		{Type: "Noted", Data: json.RawMessage(`[]`), ID: id},
		{Type: "Deposited", Tags: tags.MustParseSet("acct=a"), Data: json.RawMessage(`{"amount":10}`)},
	}
	res, err := s.Append(ctx, batch)
	require.NoError(t, err)
	require.Len(t, res.Positions, 3)
	require.Less(t, res.Positions[0], res.Positions[1])
	got, head, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, e := range got {
		require.Equal(t, batch[i].Type, e.Type)
		require.Equal(t, batch[i].Tags.Strings(), e.Tags.Strings())
		require.JSONEq(t, string(batch[i].Data), string(e.Data))
		require.Equal(t, res.Positions[i], e.Position)
		require.Equal(t, res.TransactionID, e.TransactionID)
	}
	require.JSONEq(t, `{"corr":"c1"}`, string(got[0].Metadata))
	require.Empty(t, got[1].Metadata)
	require.Equal(t, id, got[1].ID)

	// A condition with an idempotency item and fail-if items with types and
	// tags, after the cursor of the read: passes, then is idempotent, and a
	// decision from before it fails on its event.
	cond := appendif.Condition{
		Idempotency:       query.Tagged([]string{"Closed"}, "op=close-a"),
		FailIfEventsMatch: query.Tagged([]string{"Closed", "Frozen"}, "acct=a").Or(query.Tagged(nil, "acct=a", "owner=o1")),
		After:             &head,
	}
	closed := []pgdcb.Event{pgdcb.MustEvent("Closed", nil, "acct=a", "op=close-a")}
	ok, err := s.AppendIf(ctx, closed, cond)
	require.NoError(t, err)
	_, err = s.AppendIf(ctx, closed, cond)
	var idem *appendif.IdempotentError
	require.ErrorAs(t, err, &idem)
	require.Equal(t, ok.Positions[0], idem.ExistingPosition)
	cond.Idempotency = query.Query{}
	_, err = s.AppendIf(ctx, closed, cond)
	var cf *appendif.ConditionFailedError
	require.ErrorAs(t, err, &cf)
	require.Equal(t, ok.Positions[0], cf.ConflictPosition)
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed)

	// Concurrent calls (grouped when grouping is on): each decided alone.
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			tag := "w=" + strings.Repeat("x", i+1)
			_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", i, tag)},
				appendif.FailIf(query.Tagged(nil, tag), nil))
			errs <- err
		}()
	}
	for range 16 {
		require.NoError(t, <-errs)
	}
	all, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Len(t, all, 3+1+16)
}

// appendRecorder counts the append calls a pool's pgx tracer sees.
type appendRecorder struct {
	mu           sync.Mutex
	calls, ended int
}

type appendCallKey struct{}

func (r *appendRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	// An append call: the store's statement with its 17 or 19 arguments
	// (not the migration that creates the functions).
	if (strings.Contains(d.SQL, ".append_events(") || strings.Contains(d.SQL, ".append_group(")) &&
		(len(d.Args) == 17 || len(d.Args) == 19) {
		r.mu.Lock()
		r.calls++
		r.mu.Unlock()
		return context.WithValue(ctx, appendCallKey{}, true)
	}
	return ctx
}

func (r *appendRecorder) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(appendCallKey{}) != nil {
		r.mu.Lock()
		r.ended++
		r.mu.Unlock()
	}
}

// An append whose prepared statement the server no longer has (DEALLOCATE
// ALL or DISCARD ALL on the connection, a pooler's reset) is refused at
// Bind, before anything runs: the store forgets the statement, prepares it
// again and sends the call once more, and the append succeeds.
func TestAppendAfterDeallocateAll(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.MaxConns = 1 // one connection: the DEALLOCATE reaches the store's statements
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := teststore.OnPool(t, pool, nil)
	for i := range 3 {
		if i > 0 {
			// Below pgx: its own cache keeps believing in the statements.
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			_, err = conn.Conn().PgConn().Exec(ctx, "DEALLOCATE ALL").ReadAll()
			conn.Release()
			require.NoError(t, err)
		}
		_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", i, "acct=d")})
		require.NoError(t, err, "append %d", i)
	}
	evs, _, err := s.ReadAll(ctx, query.Tagged(nil, "acct=d"), nil)
	require.NoError(t, err)
	require.Len(t, evs, 3)
}
