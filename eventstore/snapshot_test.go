package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// foldState records every event folded, in order: any event folded twice,
// missed or out of order shows.
type foldState struct {
	Positions []int64 `json:"p"`
	Sum       int     `json:"s"`
}

func foldModel(q query.Query) *pgdcb.Model[foldState] {
	return pgdcb.NewModel(q, foldState{}, func(s foldState, ev pgdcb.StoredEvent) foldState {
		s.Positions = append(s.Positions, ev.Position)
		s.Sum = s.Sum*31 + int(ev.Position%1000) + len(ev.Type)
		s.Sum %= 1_000_000_007
		return s
	})
}

func snapModel(q query.Query, name string) *pgdcb.Model[foldState] {
	return foldModel(q).WithSnapshots(name, 1)
}

// probe reports whether an append with cond would commit now, in a
// transaction rolled back afterwards.
func probe(t *testing.T, s *eventstore.Store, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, ev pgdcb.Event, cond appendif.Condition) string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = s.AppendIfTx(ctx, tx, []pgdcb.Event{ev}, cond)
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, pgdcb.ErrConditionFailed):
		return "conflict"
	case errors.Is(err, pgdcb.ErrIdempotent):
		return "idempotent"
	}
	require.NoError(t, err)
	return ""
}

var propEntities = []string{"a", "b", "c"}
var propTypes = []string{"T1", "T2", "T3"}

func randEvent(r *rand.Rand, extra ...string) pgdcb.Event {
	ent := propEntities[r.IntN(len(propEntities))]
	tgs := append([]string{ent + "=x"}, extra...)
	if other := propEntities[r.IntN(len(propEntities))]; other != ent && r.IntN(3) == 0 {
		tgs = append(tgs, other+"=x")
	}
	return pgdcb.MustEvent(propTypes[r.IntN(len(propTypes))], map[string]int{"n": r.IntN(100)}, tgs...)
}

func propQueries() []query.Query {
	return []query.Query{
		query.Tagged(nil, "a=x"),
		query.Tagged([]string{"T1", "T2"}, "b=x"),
		query.All(),
		query.Tagged(nil, "c=x").Or(query.Tagged([]string{"T3", "Held"})),
	}
}

// TestSnapshotProjectEqualsFullRead folds random histories (concurrent
// appends and conditional appends decided on snapshot models, idempotency,
// rolled-back transactions, a transaction held open across snapshots) with
// and without snapshots, and requires the same states and conditions.
func TestSnapshotProjectEqualsFullRead(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { propertyRun(t, seed) })
	}
}

func propertyRun(t *testing.T, seed uint64) {
	ctx := context.Background()
	s, pool := newStore(t, &eventstore.Config{SnapshotEvery: 3})
	r := rand.New(rand.NewPCG(seed, 7))
	qs := propQueries()
	var held pgx.Tx // a transaction held open across rounds
	heldRounds := 0
	t.Cleanup(func() { // before the pool closes, should the test fail
		if held != nil {
			_ = held.Rollback(context.Background())
		}
	})
	for round := range 25 {
		// Concurrent writers.
		var wg sync.WaitGroup
		for w := range 4 {
			wr := rand.New(rand.NewPCG(seed, uint64(round*10+w)))
			wg.Go(func() {
				for range 1 + wr.IntN(6) {
					switch k := wr.IntN(10); {
					case k < 4:
						_, err := s.Append(ctx, []pgdcb.Event{randEvent(wr), randEvent(wr)})
						require.NoError(t, err)
					case k < 7: // decide on a snapshot model, then append if it holds
						// Not on queries matching the held transaction's
						// events: the check would wait for it.
						q := qs[wr.IntN(2)]
						m := snapModel(q, "prop")
						cond, err := s.Project(ctx, m)
						require.NoError(t, err)
						if wr.IntN(2) == 0 {
							cond = cond.WithIdempotency(query.Tagged(nil, fmt.Sprintf("idem=%d", wr.IntN(5))))
						}
						ev := randEvent(wr, fmt.Sprintf("idem=%d", wr.IntN(5)))
						_, err = s.AppendIf(ctx, []pgdcb.Event{ev}, cond)
						if err != nil && !errors.Is(err, pgdcb.ErrConditionFailed) && !errors.Is(err, pgdcb.ErrIdempotent) {
							require.NoError(t, err)
						}
					case k < 8: // rolled back
						tx, err := pool.Begin(ctx)
						require.NoError(t, err)
						_, err = s.AppendTx(ctx, tx, []pgdcb.Event{randEvent(wr)})
						require.NoError(t, err)
						require.NoError(t, tx.Rollback(ctx))
					default: // an event id retried
						ev := randEvent(wr)
						ev.ID = uuid.New()
						_, err := s.Append(ctx, []pgdcb.Event{ev})
						require.NoError(t, err)
						_, err = s.Append(ctx, []pgdcb.Event{ev})
						require.ErrorIs(t, err, pgdcb.ErrIdempotent)
					}
				}
			})
		}
		if held == nil && r.IntN(4) == 0 {
			// Its event commits rounds later, behind events committed
			// meanwhile and behind the reads snapshots were folded from.
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			_, err = s.AppendTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("Held", 1, "h=x")})
			require.NoError(t, err)
			held, heldRounds = tx, 1+r.IntN(4)
		}
		wg.Wait()
		if r.IntN(2) == 0 {
			eventstore.WaitSnapshotWrites(s)
		}

		// The same snapshot: with and without snapshots, in one REPEATABLE
		// READ transaction (ProjectTx).
		for i, q := range qs {
			func() {
				tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
				require.NoError(t, err)
				defer tx.Rollback(ctx)
				withSnap, plain := snapModel(q, "prop"), foldModel(q)
				c1, err := s.ProjectTx(ctx, tx, withSnap)
				require.NoError(t, err)
				c2, err := s.ProjectTx(ctx, tx, plain)
				require.NoError(t, err)
				require.Equal(t, plain.State, withSnap.State, "round %d query %d (tx)", round, i)
				require.Equal(t, c2, c1)
			}()

			// On the pool, then the same later event against both conditions.
			withSnap, plain := snapModel(q, "prop"), foldModel(q)
			c1, err := s.Project(ctx, withSnap)
			require.NoError(t, err)
			c2, err := s.Project(ctx, plain)
			require.NoError(t, err)
			require.Equal(t, plain.State, withSnap.State, "round %d query %d", round, i)
			if held != nil && i == 2 && heldRounds == 1 && r.IntN(2) == 0 {
				commitHeld(t, s, held, r) // late events behind both cursors
				held = nil
			}
			if held != nil && i >= 2 {
				continue // the probe's check would wait for the held transaction
			}
			ev := randEvent(r)
			require.Equal(t, probe(t, s, pool, ev, c2), probe(t, s, pool, ev, c1), "round %d query %d", round, i)
		}
		if held != nil {
			heldRounds--
			if heldRounds <= 0 {
				if r.IntN(2) == 0 {
					commitHeld(t, s, held, r)
				} else {
					require.NoError(t, held.Rollback(ctx))
				}
				held = nil
			}
		}
	}
	if held != nil {
		require.NoError(t, held.Rollback(ctx))
		held = nil
	}
	eventstore.WaitSnapshotWrites(s)
	if st := s.SnapshotStats(); st.Written == 0 || st.Loaded == 0 {
		// A snapshot is written only below the horizon, and another test's
		// transaction in this database may have held it through every
		// round: once the log is below it, a write and then a load must
		// happen, with the same state as a full read.
		waitLogBelowHorizon(t, s, pool)
		for range 2 {
			withSnap, plain := snapModel(qs[0], "prop"), foldModel(qs[0])
			_, err := s.Project(ctx, withSnap)
			require.NoError(t, err)
			_, err = s.Project(ctx, plain)
			require.NoError(t, err)
			require.Equal(t, plain.State, withSnap.State)
			eventstore.WaitSnapshotWrites(s)
		}
	}
	st := s.SnapshotStats()
	t.Logf("snapshot stats: %+v", st)
	require.Positive(t, st.Written)
	require.Positive(t, st.Loaded)
	require.Zero(t, st.WriteFailures)
}

func commitHeld(t *testing.T, _ *eventstore.Store, held pgx.Tx, _ *rand.Rand) {
	ctx := context.Background()
	require.NoError(t, held.Commit(ctx))
}
