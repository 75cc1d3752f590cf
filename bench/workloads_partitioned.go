package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// Partitioned projection workloads (projection.NewPartitioned,
// docs/SUBSCRIPTIONS.md "Partitioned projections"), 8 partitions of the
// tag key wallet:
//
//   - projection/partitioned/io2ms/wN (N = 1, 2, 4, 8): N workers
//     (goroutines, each a Partitioned.Run as a process of its own would
//     run it) with a handler that sleeps 2 ms per event (a call to another
//     system) run for the whole workload, started and balanced before the
//     clock. One call appends 2,000 events of 1,024 wallets (in appends of 250) and
//     waits until the workers handled them all. The floor is the same call
//     served by one worker of another projection (its own event type), in
//     the same run: the ratio is the speed-up over one worker, whose target
//     is ≥ 0.8 × N.
//   - projection/partitioned/noop/w1: a no-op handler, one worker catching
//     up with a backlog of 20,000 events from a fresh projection, against
//     today's Runner (projection.New) over the same backlog: the cost of
//     partitioning (the worker reads the query's pages once per round for
//     its partitions, each keeps its events).
func init() {
	register(Workload{Name: "projection/partitioned/noop/w1", Group: "projection", Writers: 1, Quick: true, Prepare: preparePartitionedNoop})
	for _, n := range []int{1, 2, 4, 8} {
		register(Workload{Name: fmt.Sprintf("projection/partitioned/io2ms/w%d", n), Group: "projection", Writers: 1, Quick: true,
			Prepare: preparePartitionedIO(n)})
	}
}

const (
	partitionedParts       = 8
	partitionedWallets     = 1024
	partitionedIOCost      = 2 * time.Millisecond
	partitionedIOCall      = 2000
	partitionedNoopBacklog = 20_000
	partitionedType        = "BenchWallet"
)

// partitionedPool is a pool large enough for 9 workers (a batch connection
// and a LISTEN connection each) and the calls' appends.
func partitionedPool(ctx context.Context, env *Env) (*pgxpool.Pool, *eventstore.Store, error) {
	cfg := env.Pool.Config().Copy()
	cfg.MaxConns = 2*9 + 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := eventstore.New(pool, &eventstore.Config{Schema: env.Schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, st, nil
}

// walletEvents are n events of type typ, round robin over the wallets.
func walletEvents(typ string, from, n int) []pgdcb.Event {
	evs := make([]pgdcb.Event, 0, n)
	for j := from; j < from+n; j++ {
		evs = append(evs, pgdcb.MustEvent(typ, map[string]int{"i": j}, fmt.Sprintf("wallet=w%d", j%partitionedWallets)))
	}
	return evs
}

// workerGroup is the workers of one partitioned projection over the events
// of type typ, running until stop; handled counts the events they handled.
type workerGroup struct {
	store   *eventstore.Store
	typ     string
	handled atomic.Int64
	errs    chan error
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startGroup(ctx context.Context, st *eventstore.Store, env *Env, name, typ string, workers int, perEvent time.Duration) (*workerGroup, error) {
	g := &workerGroup{store: st, typ: typ, errs: make(chan error, workers)}
	ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h := func(_ context.Context, _ pgx.Tx, evs []pgdcb.StoredEvent) error {
		for range evs {
			time.Sleep(perEvent)
		}
		g.handled.Add(int64(len(evs)))
		return nil
	}
	for w := range workers {
		p, err := projection.NewPartitioned(st, name, query.Tagged([]string{typ}), h, &projection.PartitionConfig{
			Key: "wallet", Partitions: partitionedParts, Lease: 2 * time.Second,
			ReaderConfig: projection.ReaderConfig{Identity: fmt.Sprint("w", w)}})
		if err != nil {
			g.stop()
			return nil, err
		}
		g.wg.Go(func() {
			if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
				g.errs <- err
			}
		})
	}
	// Balanced before the clock: each worker holds its share.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var owners, most int
		err := env.Pool.QueryRow(ctx, `SELECT count(*), coalesce(max(n), 0) FROM (SELECT count(*) n FROM `+env.Q+`.projection_partitions
			WHERE name = $1 AND owner IS NOT NULL GROUP BY owner) o`, name).Scan(&owners, &most)
		if err != nil {
			g.stop()
			return nil, err
		}
		if owners == workers && most == (partitionedParts+workers-1)/workers {
			return g, nil
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("%d workers of %s not balanced after 30 s (%d owners, the largest share %d)", workers, name, owners, most)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call appends n events for the group and waits until it handled them.
func (g *workerGroup) call(ctx context.Context, seq int64, n int) (int, error) {
	want := g.handled.Load() + int64(n)
	// In appends of 250: the workers start on the first while the others
	// are written.
	for i := 0; i < n; i += 250 {
		if _, err := g.store.Append(ctx, walletEvents(g.typ, int(seq)*n+i, min(250, n-i))); err != nil {
			return 0, err
		}
	}
	deadline := time.Now().Add(catchUpTimeout)
	for g.handled.Load() < want {
		select {
		case err := <-g.errs:
			return 0, err
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("partitioned workers: %d of %d events after %s", g.handled.Load()-want+int64(n), n, catchUpTimeout)
		}
	}
	if got := g.handled.Load(); got != want {
		return 0, fmt.Errorf("SELF-CHECK FAILED: %d events handled, want %d (each once)", got, want)
	}
	return n, nil
}

// partitionSkew is the largest partition's share of the wallets (and so of
// a call's events) over the mean's: FNV-1a of the value modulo the
// partitions, as projection routes them.
func partitionSkew() float64 {
	var per [partitionedParts]int
	for w := range partitionedWallets {
		h := fnv.New64a()
		h.Write([]byte(fmt.Sprint("w", w)))
		per[h.Sum64()%partitionedParts]++
	}
	return float64(slices.Max(per[:])) * partitionedParts / partitionedWallets
}

func (g *workerGroup) stop() {
	g.cancel()
	g.wg.Wait()
}

func preparePartitionedIO(workers int) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		pool, st, err := partitionedPool(ctx, env)
		if err != nil {
			return nil, err
		}
		g, err := startGroup(ctx, st, env, "io", partitionedType, workers, partitionedIOCost)
		if err != nil {
			pool.Close()
			return nil, err
		}
		one, err := startGroup(ctx, st, env, "io-one", partitionedType+"One", 1, partitionedIOCost)
		if err != nil {
			g.stop()
			pool.Close()
			return nil, err
		}
		// Plan has no close hook: Check, or a failed call, stops the
		// workers before the schema is dropped.
		stop := sync.OnceFunc(func() {
			g.stop()
			one.stop()
			pool.Close()
		})
		stopOnErr := func(n int, err error) (int, error) {
			if err != nil {
				stop()
			}
			return n, err
		}
		return &Plan{
			Op: func(ctx context.Context, _ int, seq int64, _ *Counters) (int, error) {
				return stopOnErr(g.call(ctx, seq, partitionedIOCall))
			},
			Floor: func(ctx context.Context, _ int, seq int64, _ *Counters) (int, error) {
				return stopOnErr(one.call(ctx, seq, partitionedIOCall))
			},
			FloorName: "1 worker, same calls",
			Check: func(context.Context, *Counters) error {
				stop()
				return nil
			},
			Notes: func(*Counters, float64) string {
				return fmt.Sprintf("%d workers, %d partitions, calls of %d events of %d wallets, handler sleeps %s per event; ratio = speed-up over 1 worker (target ≥ %.1f); the largest partition holds %.2f× the mean's events",
					workers, partitionedParts, partitionedIOCall, partitionedWallets, partitionedIOCost, 0.8*float64(workers), partitionSkew())
			},
		}, nil
	}
}

func preparePartitionedNoop(ctx context.Context, env *Env) (*Plan, error) {
	pool, st, err := partitionedPool(ctx, env)
	if err != nil {
		return nil, err
	}
	for i := 0; i < partitionedNoopBacklog; i += 1000 {
		if _, err := st.Append(ctx, walletEvents(partitionedType, i, 1000)); err != nil {
			pool.Close()
			return nil, err
		}
	}
	q := query.Tagged([]string{partitionedType})
	cfg := projection.ReaderConfig{PollInterval: 20 * time.Millisecond, NotifyDisabled: true}
	var runs atomic.Int64
	// catchUp runs a new projection (of run) over the backlog until its
	// handler counted every event, then stops it.
	catchUp := func(ctx context.Context, run func(context.Context, projection.Handler) error) (int, error) {
		var handled atomic.Int64
		ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
		defer cancel()
		err := run(ctx, func(_ context.Context, _ pgx.Tx, evs []pgdcb.StoredEvent) error {
			if handled.Add(int64(len(evs))) >= partitionedNoopBacklog {
				cancel()
			}
			return nil
		})
		if n := handled.Load(); n != partitionedNoopBacklog {
			return 0, fmt.Errorf("SELF-CHECK FAILED: %d events handled, want %d (%v)", n, partitionedNoopBacklog, err)
		}
		return partitionedNoopBacklog, nil
	}
	return &Plan{
		Op: func(ctx context.Context, _ int, _ int64, _ *Counters) (int, error) {
			return catchUp(ctx, func(ctx context.Context, h projection.Handler) error {
				p, err := projection.NewPartitioned(st, fmt.Sprint("partitioned-", runs.Add(1)), q, h,
					&projection.PartitionConfig{Key: "wallet", Partitions: partitionedParts, ReaderConfig: cfg})
				if err != nil {
					return err
				}
				return p.Run(ctx)
			})
		},
		Floor: func(ctx context.Context, _ int, _ int64, _ *Counters) (int, error) {
			return catchUp(ctx, func(ctx context.Context, h projection.Handler) error {
				r, err := projection.New(st, fmt.Sprint("runner-", runs.Add(1)), q, h, &projection.Config{ReaderConfig: cfg})
				if err != nil {
					return err
				}
				return r.Run(ctx)
			})
		},
		FloorName: "projection.New (one Runner), same backlog",
		Check: func(context.Context, *Counters) error {
			pool.Close()
			return nil
		},
		Notes: func(*Counters, float64) string {
			return fmt.Sprintf("a fresh projection catches up with %d events: 1 worker holding %d partitions (read once per round, pages of 8×500; each keeps its events) against one Runner; no-op handler",
				partitionedNoopBacklog, partitionedParts)
		},
	}, nil
}
