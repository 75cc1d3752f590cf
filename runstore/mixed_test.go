package runstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
)

// appendOther writes n events that are not run events (another producer in
// the same schema), in one transaction.
func appendOther(t *testing.T, es *eventstore.Store, n, batch int) {
	t.Helper()
	evs := make([]pgdcb.Event, n)
	for i := range evs {
		evs[i] = pgdcb.MustEvent("OrderPlaced", map[string]any{"n": i, "note": "other traffic"},
			fmt.Sprintf("order=o%d-%d", batch, i))
	}
	_, err := es.Append(context.Background(), evs)
	require.NoError(t, err)
}

// Other traffic in the same schema is not the projector's work: it reads the
// run events alone. With 5,000 other events around 20 run events it reads 20
// events (before: every event of the log, 5,020, in 101 batches of 50), and
// the server's plan of its tail statement reads no other row (the partial
// index events_runstore_log_order, runstore/migrations/001_runstore.sql).
func TestProjectorReadsOnlyRunEvents(t *testing.T) {
	t.Parallel()
	rs := newStore(t, &runstore.Config{ProjectorBatch: 50})
	es := rs.EventStore()
	reg := registry(rs)
	ctx := context.Background()

	const runs, otherPerRun = 20, 250
	for i := range runs {
		appendOther(t, es, otherPerRun, i)
		_, err := rs.AppendEvent(ctx, runEvent(fmt.Sprint("run-", i%4), fmt.Sprint("k", i)))
		require.NoError(t, err)
	}
	appendOther(t, es, otherPerRun, runs)

	// CatchUp returns once the snapshots hold the run events, which the
	// projector may apply beyond a horizon a parallel test holds; the count
	// is the tail's, so let the horizon pass the log first.
	waitLogBelowHorizon(t, rs)
	require.NoError(t, rs.CatchUp(ctx))
	require.Equal(t, float64(runs), counter(t, reg, "pgdcb_runstore_projector_events_total"),
		"the projector reads the run events, not the %d other events", runs*otherPerRun+otherPerRun)
	for r := range 4 {
		snap, err := rs.GetSnapshot(ctx, fmt.Sprint("run-", r))
		require.NoError(t, err)
		require.Equal(t, int64(runs/4), snap.EventCount)
	}

	// What the server reads for one tail page from the start: the run events
	// and two one-row probes (head, durable point), no other event.
	_, err := es.Pool().Exec(ctx, "ANALYZE "+ident.Schema(es)+".events")
	require.NoError(t, err)
	tailSQL, tailArgs := projectorTailStatement(t, es)
	var plan []byte
	require.NoError(t, es.Pool().QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+tailSQL, tailArgs...).Scan(&plan))
	var doc []struct{ Plan planNode }
	require.NoError(t, json.Unmarshal(plan, &doc))
	read, usesIndex := 0.0, false
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.Relation == "events" {
			read += (n.ActualRows + n.RemovedByFilter) * n.ActualLoops
			usesIndex = usesIndex || n.Index == "events_runstore_log_order"
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	require.True(t, usesIndex, "plan: %s", plan)
	require.LessOrEqual(t, read, float64(runs+2), "rows of events read by one tail page: %s", plan)
}

// projectorTailStatement returns the statement and arguments of the
// projector's tail read of a page of 50 from the start (eventstore's tail
// read narrowed to run events), as a pool's tracer sees them.
func projectorTailStatement(t *testing.T, es *eventstore.Store) (string, []any) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	rec := &tailRecorder{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	traced, err := eventstore.New(pool, &eventstore.Config{Schema: es.Schema()})
	require.NoError(t, err)
	_, err = traced.ReadTailWith(t.Context(), query.All(), eventstore.TailOptions{
		Limit: 50, MetadataContains: json.RawMessage(runstore.Marker)})
	require.NoError(t, err)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.sql, "the tail read's statement was not seen")
	return rec.sql, rec.args
}

// tailRecorder records the statement of a batch that reads run events.
type tailRecorder struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (r *tailRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (r *tailRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *tailRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (r *tailRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.Contains(d.SQL, "runstore") {
		r.mu.Lock()
		r.sql, r.args = d.SQL, d.Args
		r.mu.Unlock()
	}
}
func (r *tailRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

type planNode struct {
	Relation        string     `json:"Relation Name"`
	Index           string     `json:"Index Name"`
	ActualRows      float64    `json:"Actual Rows"`
	ActualLoops     float64    `json:"Actual Loops"`
	RemovedByFilter float64    `json:"Rows Removed by Filter"`
	Plans           []planNode `json:"Plans"`
}

// CatchUp's check (is every run event committed before the call in its run's
// snapshot?) reads the run events after the projector's checkpoint and no
// other row of events: a range scan of events_runstore_log_order. From the
// start of the log it reads the 20 run events among 2,000 others; from the
// last run event (where the checkpoint is once the tail passed it), none.
func TestCatchUpCheckReadsRunEventsAfterTheCheckpoint(t *testing.T) {
	t.Parallel()
	rs := newStore(t, nil)
	es := rs.EventStore()
	ctx := context.Background()
	const runs = 20
	for i := range runs {
		appendOther(t, es, 100, i)
		_, err := rs.AppendEvent(ctx, runEvent(fmt.Sprint("run-", i%4), fmt.Sprint("k", i)))
		require.NoError(t, err)
	}
	require.NoError(t, rs.CatchUp(ctx))
	_, err := es.Pool().Exec(ctx, "ANALYZE "+ident.Schema(es)+".events")
	require.NoError(t, err)
	var last cursor.Cursor
	require.NoError(t, es.Pool().QueryRow(ctx, `SELECT transaction_id, position FROM `+ident.Schema(es)+`.events
		WHERE metadata @> '{"runstore": "v1"}' ORDER BY transaction_id DESC, position DESC LIMIT 1`).
		Scan(&last.TransactionID, &last.Position))

	read := func(from cursor.Cursor) float64 {
		t.Helper()
		var snap string
		require.NoError(t, es.Pool().QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snap))
		var plan []byte
		require.NoError(t, es.Pool().QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+runstore.UnreflectedSQL(rs),
			from.TransactionID, from.Position, snap).Scan(&plan))
		var doc []struct{ Plan planNode }
		require.NoError(t, json.Unmarshal(plan, &doc))
		rows, usesIndex := 0.0, false
		var walk func(n planNode)
		walk = func(n planNode) {
			if n.Relation == "events" {
				rows += (n.ActualRows + n.RemovedByFilter) * n.ActualLoops
				usesIndex = usesIndex || n.Index == "events_runstore_log_order"
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		walk(doc[0].Plan)
		require.True(t, usesIndex, "plan: %s", plan)
		return rows
	}
	require.Equal(t, float64(runs), read(cursor.Start), "from the start: the run events, no other event")
	require.Zero(t, read(last), "from the last run event: nothing")
}
