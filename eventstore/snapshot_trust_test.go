package eventstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
)

func appendN(t testing.TB, s *eventstore.Store, n int, tagStrings ...string) {
	t.Helper()
	for n > 0 {
		k := min(n, 500)
		evs := make([]pgdcb.Event, k)
		for i := range evs {
			evs[i] = pgdcb.MustEvent("Counted", map[string]int{"i": i}, tagStrings...)
		}
		_, err := s.Append(context.Background(), evs)
		require.NoError(t, err)
		n -= k
	}
}

// waitLogBelowHorizon waits until every event of s's log was written by a
// transaction below the cluster's horizon (pg_snapshot_xmin of a fresh
// snapshot), which is when a decision snapshot can be taken at the log's
// last event. Another session's open transaction holds the horizon back;
// the wait fails after two minutes naming the oldest such session.
func waitLogBelowHorizon(t testing.TB, s *eventstore.Store, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	await.Until(t, 2*time.Minute, func() (bool, string) {
		var below bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce((SELECT max(transaction_id) FROM `+ident.Schema(s)+`.events), '0')
			< pg_snapshot_xmin(pg_current_snapshot())`).Scan(&below))
		if below {
			return true, ""
		}
		var holder string
		_ = pool.QueryRow(ctx, `SELECT format('pid %s, application %L, state %s, query %L', pid, application_name, state, left(query, 80))
			FROM pg_stat_activity WHERE backend_xid IS NOT NULL OR backend_xmin IS NOT NULL
			ORDER BY age(coalesce(backend_xid, backend_xmin)) DESC LIMIT 1`).Scan(&holder)
		return false, "the cluster's horizon behind the log; oldest transaction: " + holder
	})
}

// A snapshot of another version, one that does not decode, one whose point
// no longer names its event, one from before a retention: never used.
func TestSnapshotUntrustedNeverUsed(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t, &eventstore.Config{SnapshotsManual: true})
	tbl := ident.Schema(s) + ".decision_snapshots"
	q := query.Tagged(nil, "e=1")
	appendN(t, s, 10, "e=1")
	appendN(t, s, 3, "e=1", "drop=1")
	appendN(t, s, 5, "e=1")
	full := func() foldState {
		m := foldModel(q)
		_, err := s.Project(ctx, m)
		require.NoError(t, err)
		return m.State
	}
	want := full()
	require.Len(t, want.Positions, 18)
	// A snapshot is taken at the log's last event below the cluster's
	// horizon. Another test's open transaction (any package's: the server
	// is shared) can hold the horizon behind these appends, and then
	// SaveSnapshot has nothing to save and the Project below loads
	// nothing (Loaded 0, seen under load). Wait until it has passed them.
	waitLogBelowHorizon(t, s, pool)
	require.NoError(t, s.SaveSnapshot(ctx, snapModel(q, "u")))
	// Used when sound.
	m := snapModel(q, "u")
	_, err := s.Project(ctx, m)
	require.NoError(t, err)
	require.Equal(t, want, m.State)
	require.EqualValues(t, 1, s.SnapshotStats().Loaded)
	// Poison the stored state: if it were used, the result would show it.
	_, err = pool.Exec(ctx, "UPDATE "+tbl+` SET state = convert_to('{"p":[1],"s":42}', 'UTF8')`)
	require.NoError(t, err)

	cases := []struct {
		name, sql string
		model     *pgdcb.Model[foldState]
		counter   func(eventstore.SnapshotStats) int64
	}{
		{"other version", "", foldModel(q).WithSnapshots("u", 2),
			func(st eventstore.SnapshotStats) int64 { return st.IgnoredVersion }},
		{"corrupt", "UPDATE " + tbl + ` SET state = convert_to('{"p":[1],', 'UTF8')`, snapModel(q, "u"),
			func(st eventstore.SnapshotStats) int64 { return st.IgnoredCorrupt }},
		{"point gone", "UPDATE " + tbl + ` SET state = convert_to('{"p":[1],"s":42}', 'UTF8'), transaction_id = '1'`, snapModel(q, "u"),
			func(st eventstore.SnapshotStats) int64 { return st.Loaded }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.sql != "" {
				_, err := pool.Exec(ctx, c.sql)
				require.NoError(t, err)
			}
			before := c.counter(s.SnapshotStats())
			loadedBefore := s.SnapshotStats().Loaded
			_, err := s.Project(ctx, c.model)
			require.NoError(t, err)
			require.Equal(t, want, c.model.State)
			require.Equal(t, loadedBefore, s.SnapshotStats().Loaded, "not used")
			if c.name != "point gone" {
				require.Equal(t, before+1, c.counter(s.SnapshotStats()), "counted")
			}
		})
	}

	t.Run("written before a retention", func(t *testing.T) {
		_, err := pool.Exec(ctx, "DELETE FROM "+tbl)
		require.NoError(t, err)
		require.NoError(t, s.SaveSnapshot(ctx, snapModel(q, "u")))
		var n int64
		// Retention drops every snapshot; a row put back with the old epoch
		// (as a write racing the retention would) is detected as stale.
		// keep is a table of the test's schema, not a temporary one: the
		// pool may run the next statement on another connection.
		keep := ident.Schema(s) + ".keep"
		_, err = pool.Exec(ctx, "CREATE TABLE "+keep+" AS SELECT * FROM "+tbl)
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, "SELECT "+ident.Schema(s)+".delete_events_tagged('drop=1')").Scan(&n))
		require.EqualValues(t, 3, n)
		var left int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+tbl).Scan(&left))
		require.Zero(t, left, "retention dropped the snapshots")
		want := full()
		require.Len(t, want.Positions, 15)
		_, err = pool.Exec(ctx, "INSERT INTO "+tbl+" SELECT * FROM "+keep+"; DROP TABLE "+keep)
		require.NoError(t, err)
		stale := s.SnapshotStats().IgnoredStale
		m := snapModel(q, "u")
		_, err = s.Project(ctx, m)
		require.NoError(t, err)
		require.Equal(t, want, m.State)
		require.Equal(t, stale+1, s.SnapshotStats().IgnoredStale)
	})
}

// A snapshot that cannot be written fails neither Project nor the append
// that follows; each failure is logged at Warn and counted; SaveSnapshot,
// asked explicitly, reports it.
func TestSnapshotWriteFailureDoesNotFailProject(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer // written under the handler's lock, read after the writes ended
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, pool := newStore(t, &eventstore.Config{SnapshotEvery: 1, Logger: logger})
	sch := ident.Schema(s)
	_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION %[1]s.no_snap() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'no snapshots today'; END $$;
		CREATE TRIGGER no_snap BEFORE INSERT OR UPDATE ON %[1]s.decision_snapshots FOR EACH ROW EXECUTE FUNCTION %[1]s.no_snap()`, sch))
	require.NoError(t, err)
	q := query.Tagged(nil, "e=1")
	appendN(t, s, 20, "e=1")
	for round := 1; round <= 3; round++ {
		// A snapshot is written only below the cluster's horizon: while
		// another session's transaction (another package's test) holds it
		// behind the log, Project attempts no write. Project again until it
		// does.
		await.True(t, 30*time.Second, fmt.Sprintf("round %d: a snapshot write attempted (the horizon stayed behind the log)", round), func() bool {
			m := snapModel(q, "w")
			cond, err := s.Project(ctx, m)
			require.NoError(t, err)
			require.Len(t, m.State.Positions, 20)
			eventstore.WaitSnapshotWrites(s)
			if s.SnapshotStats().WriteFailures >= int64(round) {
				_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("X", 1, "other=1")}, cond)
				require.NoError(t, err)
				return true
			}
			return false
		})
	}
	require.EqualValues(t, 3, s.SnapshotStats().WriteFailures)
	require.Zero(t, s.SnapshotStats().Written)
	warned := 0
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "decision snapshot not written") &&
			strings.Contains(line, "no snapshots today") {
			warned++
		}
	}
	require.Equal(t, 3, warned, "each failed write is logged at Warn with its error:\n%s", logs.String())
	require.ErrorContains(t, s.SaveSnapshot(ctx, snapModel(q, "w")), "no snapshots today")
}
