package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
)

// startOwnPair starts a throwaway primary and standby for a test that holds
// a transaction open on the primary (which would slow every other test's
// standby proof on the shared pair), and stores on a fresh schema of it.
func startOwnPair(t *testing.T) (pair *pgtest.Pair, onPrimary, onStandby *eventstore.Store, pp, sp *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pair, err := pgtest.StartPair(ctx, pgserver.Options{Settings: map[string]string{"synchronous_commit": "on"}},
		pgserver.StandbyOptions{})
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = pair.Close() })
	onPrimary, onStandby, pp, sp = standbyStores(t, pair, &eventstore.Config{NotifyDisabled: true})
	return pair, onPrimary, onStandby, pp, sp
}

// spendXIDs gives n subtransactions of one committed transaction an id
// each, writing no event (a row of a scratch table in the store's schema).
func spendXIDs(t testing.TB, pp *pgxpool.Pool, schema string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	burn := pgx.Identifier{schema, "burn"}.Sanitize()
	_, err := pp.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+burn+` (i int)`)
	require.NoError(t, err)
	_, err = pp.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN
		FOR i IN 1..%d LOOP
			BEGIN INSERT INTO %s VALUES (i); EXCEPTION WHEN others THEN RAISE; END;
		END LOOP; END $$`, n, burn))
	require.NoError(t, err)
}

// requireAgree checks that a read's cursor counts as seen every event the
// read returned: the state and the cursor agree.
func requireAgree(t *testing.T, evs []pgdcb.StoredEvent, c cursor.Cursor) {
	t.Helper()
	for _, e := range evs {
		require.True(t, c.Seen(e.TransactionID, e.Position),
			"the read returned (tx %d, pos %d) but its cursor %d,%d snap %v does not count it as seen",
			e.TransactionID, e.Position, c.TransactionID, c.Position, c.Snapshot)
	}
}

// Issue 36, part 2: with a transaction holding an id open on the primary and
// 1,100 ids spent since without events, a decision read on the standby
// returns the event appended after them with a cursor that counts it as
// seen, so that every decision after it commits while the transaction stays
// open (it failed every time when the proof moved the cursor back past 1,000
// unproven ids while the read still returned the event).
func TestStandbyLongTransactionDecisions(t *testing.T) {
	pair, onPrimary, onStandby, pp, sp := startOwnPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	held := pgtest.HoldXID(t, pair.Primary.DSN())
	spendXIDs(t, pp, onPrimary.Schema(), 1100)
	q := query.Tagged(nil, "account=a1")
	_, err := onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", nil, "account=a1")})
	require.NoError(t, err)
	require.NoError(t, pair.Sync(ctx))

	// The premise: the standby's snapshot is held back by the open
	// transaction, more than 1,000 ids below the head of the log.
	var xmin, head uint64
	require.NoError(t, sp.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint,
		(SELECT max(transaction_id::text::bigint) FROM `+pgx.Identifier{onStandby.Schema(), "events"}.Sanitize()+`)`).
		Scan(&xmin, &head))
	require.Equal(t, held.XID, xmin, "the open transaction holds the standby's xmin")
	require.Greater(t, head-xmin, uint64(1100), "more than 1,100 ids between the open transaction and the event")

	for i := range 10 {
		evs, cur, err := onStandby.ReadAll(ctx, q, nil)
		require.NoError(t, err)
		require.Len(t, evs, i+1, "the standby read returns every event of a1")
		requireAgree(t, evs, cur)
		require.False(t, cur.Seen(held.XID, 1<<62), "the open transaction is not counted as seen")
		res, err := onPrimary.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", i, "account=a1")},
			appendif.FailIf(q, &cur))
		require.NoError(t, err, "decision %d, read on the standby with cursor %d,%d snap %d:%d (%d in progress)",
			i, cur.TransactionID, cur.Position, cur.Snapshot.Xmin, cur.Snapshot.Xmax, len(cur.Snapshot.Xip))
		require.NoError(t, pair.Standby.WaitReplay(ctx, mustWAL(t, pair)), "replay of decision %d (tx %d)", i, res.TransactionID)
	}
	require.Zero(t, eventstore.ProofPast(onStandby), "no proof was past its bounds")
	running, err := held.Running(ctx)
	require.NoError(t, err)
	require.True(t, running, "the transaction stayed open throughout")

	// The reads ran on the standby: with its replay paused, a read does not
	// show an event the primary committed since.
	require.NoError(t, pair.Standby.PauseReplay(ctx))
	_, err = onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", "unreplayed", "account=a1")})
	require.NoError(t, err)
	evs, _, err := onStandby.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, evs, 11, "the read within the proof's bounds stays on the standby")
	require.NoError(t, pair.Standby.ResumeReplay(ctx))
}

func mustWAL(t *testing.T, pair *pgtest.Pair) string {
	t.Helper()
	lsn, err := pair.Primary.WALPosition(context.Background())
	require.NoError(t, err)
	return lsn
}

// A decision read in a caller's transaction on a standby is proved like one
// on the read pool, also for a store without Config.ReadPool (the …Tx forms
// run wherever the transaction is): with a transaction open on the primary,
// neither ReadAllTx nor HeadTx counts it as seen, and an AppendIf after
// their cursors fails once it commits its matching event.
func TestStandbyDecisionReadInCallersTransaction(t *testing.T) {
	pair := pgtest.StandbyPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	onPrimary, onStandby, pp, sp := standbyStores(t, pair, nil)
	q := query.Tagged(nil, "seat=s1")
	open, x := openSeatTrap(ctx, t, pair, onPrimary, pp)
	var err error

	var curs []cursor.Cursor
	for _, s := range []*eventstore.Store{onPrimary, onStandby} {
		tx, err := sp.Begin(ctx)
		require.NoError(t, err)
		evs, c, err := s.ReadAllTx(ctx, tx, q, nil)
		require.NoError(t, err)
		require.Empty(t, evs)
		hc, err := s.HeadTx(ctx, tx)
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		withPool := s == onStandby
		require.False(t, c.Seen(x, 1<<62), "ReadAllTx on the standby (store with read pool: %v) does not count the open transaction as seen", withPool)
		require.False(t, hc.Seen(x, 1<<62), "nor does HeadTx (store with read pool: %v)", withPool)
		curs = append(curs, c, hc)
	}
	require.NoError(t, open.Commit(ctx))
	for i, c := range curs {
		_, err = onPrimary.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("SeatTaken", i, "seat=s1")}, appendif.FailIf(q, &c))
		require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "cursor %d: the append sees the event its read did not", i)
	}
}

// Past the proof's bounds (more ids without events than a cursor lists, or
// more transactions with events than the proof steps through, from a
// transaction held open on the primary), a decision read on the standby runs
// again on the primary: with the standby's replay paused, Read, Project and
// Head return what the primary has, with cursors that agree, and the
// decisions after them commit. Reads after the first skip the proof while the
// held transaction holds the standby's xmin.
func TestStandbyProofFallsBackToPrimary(t *testing.T) {
	pair, onPrimary, onStandby, pp, _ := startOwnPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, past := range []string{"gaps", "steps"} {
		t.Run(past, func(t *testing.T) {
			held := pgtest.HoldXID(t, pair.Primary.DSN())
			defer held.Release()
			acct := "account=" + past
			q := query.Tagged(nil, acct)
			if past == "gaps" {
				spendXIDs(t, pp, onPrimary.Schema(), eventstore.ProvenMaxGaps+100)
			} else {
				for i := range eventstore.ProvenMaxSteps + 1 {
					_, err := onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Other", i, "other=o1")})
					require.NoError(t, err)
				}
			}
			_, err := onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Opened", nil, acct)})
			require.NoError(t, err)
			require.NoError(t, pair.Sync(ctx))
			require.NoError(t, pair.Standby.PauseReplay(ctx))
			defer func() { require.NoError(t, pair.Standby.ResumeReplay(context.WithoutCancel(ctx))) }()
			dep, err := onPrimary.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, acct)})
			require.NoError(t, err)

			evs, cur, err := onStandby.ReadAll(ctx, q, nil)
			require.NoError(t, err)
			require.Len(t, evs, 2, "the read ran on the primary: it shows the event the standby has not replayed")
			requireAgree(t, evs, cur)
			require.False(t, cur.Seen(held.XID, 1<<62), "the open transaction is not counted as seen")
			require.Equal(t, held.XID, eventstore.ProofPast(onStandby),
				"the reads after it with the same xmin skip the proof (Project and Head below)")

			var cond appendif.Condition
			for _, named := range []bool{false, true} { // Fold over Read; the decision snapshots' read
				m := pgdcb.NewModel(q, 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
				if named {
					m.Name, m.Version = "count", 1
				}
				cond, err = onStandby.Project(ctx, m)
				require.NoError(t, err)
				require.Equal(t, 2, m.State, "Project ran on the primary (snapshots: %v)", named)
				require.True(t, cond.After.Seen(dep.TransactionID, dep.Positions[0]), "its cursor counts what it folded (snapshots: %v)", named)
			}

			hc, err := onStandby.Head(ctx)
			require.NoError(t, err)
			require.True(t, hc.Seen(dep.TransactionID, dep.Positions[0]), "Head is the primary's")

			_, err = onPrimary.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 2, acct)}, appendif.FailIf(q, &cur))
			require.NoError(t, err, "the decision after the read commits")
			_, err = onPrimary.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 3, acct)}, cond)
			require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "the Project decision sees the one just committed")
		})
	}
}
