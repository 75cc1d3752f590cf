package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// Logical decoding mode (package logical, docs/SUBSCRIPTIONS.md "Logical
// decoding mode"), issue #24's targets:
//
//   - subscription/live/2000ev-s/held-same-db/logical and …/tail: the paced
//     load of subscription/live/2000ev-s (pacedWriters writers, one event per
//     Append, lagRate events/s together) into a projection with a no-op
//     handler, while a transaction of the SAME database holds an xid from
//     Prepare to Check; the first projection reads through logical decoding,
//     the second through tail reads (the default), which the holder stalls
//     until Check releases it. Same Notes and Extra as the paced rows, plus
//     how many events the projection handled while the holder was open.
//   - subscription/live/2000ev-s/projection/tail: the same tail-read
//     projection with nothing held, on the same cluster: what the machine
//     and the projection's own batches allow, the baseline of the two above.
//   - subscription/live/1000ev-s/held-same-db/logical and …/projection/tail:
//     the same at half the pace (halfRate), with more of the machine's CPU
//     idle (the machine CPU column).
//   - subscription/catchup/<size>/logical: a backlog of <size> events
//     (appended in transactions of 1,000) read from a replication slot
//     that existed before it (logical.Reader with its defaults: a backlog of
//     DefaultCatchUpBytes or more comes through the SQL interface, see
//     logical.Config.CatchUpBytes; batches of catchUpBatch, never confirmed,
//     so every call reads the same backlog again), against the
//     bare ReadTail loop (floor) and subscription.Run (a baseline: the
//     subscription/catchup row's operation) over the same backlog.
//
// They need wal_level=logical: on a server without it they run on a
// throwaway cluster this program starts (internal/pgserver, local binaries)
// with wal_level=logical and synchronous_commit=on, and their Notes say so.
// Not in --quick (a cluster start, and a backlog to load). The live rows'
// appends and readers go through a store in the default configuration
// (groupedStore: group commit on).
func init() {
	register(
		Workload{Name: "subscription/live/2000ev-s/held-same-db/logical", Group: "subscription", Writers: pacedWriters, Prepare: prepareLogicalLive(lagRate, true, true)},
		Workload{Name: "subscription/live/2000ev-s/held-same-db/tail", Group: "subscription", Writers: pacedWriters, Prepare: prepareLogicalLive(lagRate, false, true)},
		Workload{Name: "subscription/live/2000ev-s/projection/tail", Group: "subscription", Writers: pacedWriters, Prepare: prepareLogicalLive(lagRate, false, false)},
		Workload{Name: "subscription/live/1000ev-s/held-same-db/logical", Group: "subscription", Writers: pacedWriters, Prepare: prepareLogicalLive(halfRate, true, true)},
		Workload{Name: "subscription/live/1000ev-s/projection/tail", Group: "subscription", Writers: pacedWriters, Prepare: prepareLogicalLive(halfRate, false, false)},
		Workload{Name: "subscription/catchup/10k/logical", Group: "subscription", Writers: 1, Prepare: prepareLogicalCatchUp(10_000)},
		Workload{Name: "subscription/catchup/1M/logical", Group: "subscription", Writers: 1, Prepare: prepareLogicalCatchUp(1_000_000)},
	)
}

// logicalCluster is the throwaway cluster of the logical workloads, started
// on first use when the bench's server does not have wal_level=logical, and
// closed by closeLogicalCluster when the program ends.
var logicalCluster struct {
	mu    sync.Mutex
	srv   *pgserver.Server
	pool  *pgxpool.Pool
	meter *meter // the cost readings of this cluster (Plan.Meter)
}

func closeLogicalCluster() {
	logicalCluster.mu.Lock()
	defer logicalCluster.mu.Unlock()
	if logicalCluster.pool != nil {
		logicalCluster.pool.Close()
	}
	if logicalCluster.srv != nil {
		_ = logicalCluster.srv.Close()
	}
	logicalCluster.srv, logicalCluster.pool = nil, nil
}

// logicalEnv returns the Env a logical workload runs in: env itself when its
// server has wal_level=logical, else a fresh schema on the throwaway
// cluster; where says which, for the Notes; drop removes the schema of the
// throwaway cluster (env's own is dropped by the runner).
func logicalEnv(ctx context.Context, env *Env) (lenv *Env, where string, drop func(), err error) {
	var level string
	if err := env.Pool.QueryRow(ctx, `SHOW wal_level`).Scan(&level); err != nil {
		return nil, "", nil, err
	}
	if level == "logical" {
		return env, "on the bench's server (wal_level=logical)", func() {}, nil
	}
	logicalCluster.mu.Lock()
	defer logicalCluster.mu.Unlock()
	if logicalCluster.srv == nil {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		srv, err := pgserver.StartThrowaway(sctx, pgserver.Options{Settings: map[string]string{
			"wal_level": "logical", "max_replication_slots": "10", "max_wal_senders": "10",
			"synchronous_commit": "on", "max_connections": "100"}})
		cancel()
		if err != nil {
			return nil, "", nil, fmt.Errorf("the bench's server has wal_level=%s; starting a throwaway cluster with wal_level=logical: %w", level, err)
		}
		cfg, err := pgxpool.ParseConfig(srv.DSN())
		if err != nil {
			_ = srv.Close()
			return nil, "", nil, err
		}
		cfg.MaxConns = pacedWriters + 8
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			_ = srv.Close()
			return nil, "", nil, err
		}
		logicalCluster.srv, logicalCluster.pool = srv, pool
		logicalCluster.meter = newMeter(ctx, pool)
	}
	lenv, err = newEnv(ctx, logicalCluster.pool, 0)
	if err != nil {
		return nil, "", nil, err
	}
	lenv.meter = logicalCluster.meter
	where = "on a throwaway PostgreSQL cluster with wal_level=logical, synchronous_commit=on (the bench's server has wal_level=" + level + "; the cost columns measure this cluster)"
	return lenv, where, func() { _ = lenv.drop(context.Background()) }, nil
}

func prepareLogicalLive(rate int, logicalMode, held bool) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		lenv, where, drop, err := logicalEnv(ctx, env)
		if err != nil {
			return nil, err
		}
		var (
			mu        sync.Mutex
			samples   []time.Duration
			measuring atomic.Bool
			nappend   atomic.Int64
			ndeliv    atomic.Int64
			lastSeq   = map[int64]int64{} // per writer: its calls are sequential, so commit order is seq order
			orderErr  error
			acks      = &ackMeter{first: map[[2]int64]ackMark{}}
			runErr    = make(chan error, 1)
		)
		h := func(_ context.Context, _ pgx.Tx, evs []pgdcb.StoredEvent) error {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, e := range evs {
				var d struct{ T0, W, Seq int64 }
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return err
				}
				if last, ok := lastSeq[d.W]; ok && d.Seq <= last && orderErr == nil {
					orderErr = fmt.Errorf("SELF-CHECK FAILED: writer %d's call %d handled after its call %d: out of order or twice", d.W, d.Seq, last)
				}
				lastSeq[d.W] = d.Seq
				ndeliv.Add(1)
				if d.W < 0 {
					continue // the warm-up event
				}
				rec := measuring.Load()
				if rec {
					samples = append(samples, now.Sub(time.Unix(0, d.T0)))
				}
				acks.mark(d.W, d.Seq, false, now, rec)
			}
			return nil
		}
		cfg := &projection.Config{ReaderConfig: projection.ReaderConfig{HeartbeatInterval: time.Second}}
		mode := "tail reads (the default)"
		if logicalMode {
			cfg.Logical = &logical.Config{}
			mode = "logical decoding"
		}
		name := "bench_paced"
		st, err := groupedStore(lenv) // the default configuration: group commit on
		if err != nil {
			drop()
			return nil, err
		}
		p, err := projection.New(st, name, query.New(query.Item{Types: []string{pacedType}}), h, cfg)
		if err != nil {
			drop()
			return nil, err
		}
		bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
		go func() { runErr <- p.Run(bg) }()
		release := func() error { return nil }
		var stopOnce sync.Once
		var stopErr error
		stop := func() error {
			stopOnce.Do(func() {
				_ = release()
				cancel()
				if err := <-runErr; !errors.Is(err, context.Canceled) {
					stopErr = fmt.Errorf("projection.Run: %w", err)
				}
				if logicalMode {
					_ = logical.DropSlot(context.Background(), lenv.Pool, logical.SlotName(lenv.Schema, name))
				}
				_ = st.Close(context.Background())
				drop()
			})
			return stopErr
		}
		// Delivering (logical: the slot exists; creating it waits for the
		// running transactions, so the holder comes after).
		if _, err := st.Append(ctx, []pgdcb.Event{pacedEvent(pacedType, -1, 0)}); err != nil {
			_ = stop()
			return nil, err
		}
		for deadline := time.Now().Add(liveTimeout); ndeliv.Load() < 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = stop()
				return nil, errors.New("the warm-up event was not handled")
			}
		}
		if held {
			if release, err = holdXact(ctx, lenv, sameDatabase); err != nil {
				_ = stop()
				return nil, err
			}
		}
		var heldDeliv atomic.Int64 // handled while the holder was open
		latMs := func() (p50, p99, mx float64, n int) { return latencyMs(&mu, &samples) }
		ackMs := acks.percentilesMs
		// finish ends the holder (the tail read's events come then), waits
		// until every appended event was handled and stops the projection;
		// once.
		finish := sync.OnceValue(func() error {
			if logicalMode {
				// Delivery does not wait for the holder: let the last
				// events arrive while it is still open.
				for deadline := time.Now().Add(10 * time.Second); ndeliv.Load() < nappend.Load()+1 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
			}
			heldDeliv.Store(ndeliv.Load() - 1)
			if err := release(); err != nil {
				_ = stop()
				return err
			}
			deadline := time.Now().Add(liveTimeout)
			for ndeliv.Load() < nappend.Load()+1 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			err := stop()
			mu.Lock()
			oerr := orderErr
			mu.Unlock()
			if oerr != nil {
				return oerr
			}
			if a, d := nappend.Load(), ndeliv.Load()-1; a != d {
				return fmt.Errorf("SELF-CHECK FAILED: %d events appended, %d handled", a, d)
			}
			if _, _, _, n := latMs(); n == 0 {
				return errors.New("SELF-CHECK FAILED: no delivery measured")
			}
			return err
		})
		op, floor := pacedAppends(rate, st, acks, &measuring, &nappend, stop)
		return &Plan{
			Start:     func() { measuring.Store(true) },
			Op:        op,
			Floor:     floor,
			FloorName: "Append alone, same pace (an event the projection does not match)",
			Meter:     lenv.meter,
			Check:     func(context.Context, *Counters) error { return finish() },
			Notes: func(c *Counters, elapsed float64) string {
				ferr := finish() // Notes come before Check: the tail read's latencies need the holder ended
				p50, p99, mx, n := latMs()
				a50, a99 := ackMs()
				c50, c99 := acks.callPercentilesMs()
				hold := "nothing held open"
				if held {
					hold = fmt.Sprintf("a transaction holding an xid open in the SAME database for the whole workload: %d of %d events handled while it was open", heldDeliv.Load(), nappend.Load())
				}
				s := fmt.Sprintf("projection (no-op handler) fed by %s; append → handler p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d events); commit acknowledged → handler p50 %.1f ms, p99 %.1f ms; the Append call alone (→ acknowledged) p50 %.1f ms, p99 %.1f ms; %.0f ev/s reached of %d targeted; %s; %s",
					mode, p50, p99, mx, n, a50, a99, c50, c99, float64(c.Successes.Load())/elapsed, rate, hold, where)
				if ferr != nil {
					s += "; " + ferr.Error()
				}
				return s
			},
			Extra: func(c *Counters, elapsed float64) map[string]any {
				_ = finish()
				p50, p99, mx, n := latMs()
				a50, a99 := ackMs()
				c50, c99 := acks.callPercentilesMs()
				return map[string]any{"delivery_p50_ms": p50, "delivery_p99_ms": p99, "delivery_max_ms": mx, "deliveries": n,
					"ack_to_handler_p50_ms": a50, "ack_to_handler_p99_ms": a99, "append_call_p50_ms": c50, "append_call_p99_ms": c99,
					"target_events_per_s": rate, "held_transaction_same_db": held, "logical": logicalMode,
					"handled_while_held": heldDeliv.Load(), "appended": nappend.Load(), "server": where}
			},
		}, nil
	}
}

// logicalBacklogTx is the size of the backlog's transactions.
const logicalBacklogTx = 1000

func prepareLogicalCatchUp(n int) func(context.Context, *Env) (*Plan, error) {
	return func(ctx context.Context, env *Env) (*Plan, error) {
		lenv, where, drop, err := logicalEnv(ctx, env)
		if err != nil {
			return nil, err
		}
		const name = "bench_catchup"
		slot := logical.SlotName(lenv.Schema, name)
		cleanup := func() {
			_ = logical.DropSlot(context.Background(), lenv.Pool, slot)
			drop()
		}
		q := query.All()
		// The slot, before the backlog: the initial read of an empty log.
		rd, err := logical.Open(ctx, lenv.Store, name, q, logical.Checkpoint{}, cursor.Start, nil)
		if err != nil {
			cleanup()
			return nil, err
		}
		b, err := rd.Next(ctx, catchUpBatch, 10*time.Millisecond)
		_ = rd.Close(ctx)
		if err == nil && (len(b.Events) > 0 || b.Checkpoint.Sync != nil) {
			err = errors.New("the initial read of an empty log returned events")
		}
		if err != nil {
			cleanup()
			return nil, err
		}
		from := b.Checkpoint
		// The backlog, in transactions of logicalBacklogTx events, one
		// after the other: commit order is log order.
		for lo := 1; lo <= n; lo += logicalBacklogTx {
			if _, err := lenv.Pool.Exec(ctx, `INSERT INTO `+lenv.Q+`.events (type, tags, data)
				SELECT 'BenchEvent' || (g % 7), ARRAY['entity=' || (g % 1000), 'shard=' || (g % 16)],
				       jsonb_build_object('n', g, 'amount', g % 1000, 'note', 'benchmark fixture payload')
				  FROM generate_series($1::bigint, $2::bigint) AS g`, lo, min(lo+logicalBacklogTx-1, n)); err != nil {
				cleanup()
				return nil, fmt.Errorf("loading the backlog: %w", err)
			}
		}
		if _, err := lenv.Pool.Exec(ctx, `VACUUM ANALYZE `+lenv.Q+`.events`); err != nil {
			cleanup()
			return nil, err
		}
		lenv.Fixture = n
		tail, err := prepareCatchUp(ctx, lenv)
		if err != nil {
			cleanup()
			return nil, err
		}
		return &Plan{
			Meter: lenv.meter,
			Op: func(ctx context.Context, _ int, _ int64, c *Counters) (int, error) {
				ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
				defer cancel()
				rd, err := logical.Open(ctx, lenv.Store, name, q, from, cursor.Start, nil)
				if err != nil {
					return 0, err
				}
				// Never confirmed: the next call streams the backlog again.
				defer rd.Close(context.WithoutCancel(ctx))
				var chk orderCheck
				for chk.n < n {
					b, err := rd.Next(ctx, catchUpBatch, 100*time.Millisecond)
					if err != nil {
						return 0, fmt.Errorf("after %d of %d events: %w", chk.n, n, err)
					}
					if err := chk.add(b.Events); err != nil {
						return 0, err
					}
				}
				if err := chk.done(n); err != nil {
					return 0, err
				}
				c.Successes.Add(1)
				return n, nil
			},
			Floor:     tail.Floor,
			FloorName: tail.FloorName,
			Baselines: []Baseline{{Name: "subscription.Run, tail reads (the subscription/catchup operation)", Op: tail.Op}},
			Check: func(ctx context.Context, c *Counters) error {
				defer cleanup()
				if c.Successes.Load() == 0 {
					return errors.New("SELF-CHECK FAILED: no catch-up completed")
				}
				return nil
			},
			Notes: func(*Counters, float64) string {
				return fmt.Sprintf("whole %s backlog per call (transactions of %d events) read from a slot created before it by logical.Reader with its defaults (a backlog of logical.Config.CatchUpBytes (default 4 MiB) or more is read through the SQL interface, a temporary copy of the slot, in calls of logical.Config.CatchUpChunk changes (default 2,000,000)), batches of %d, no handler; %s",
					sizeName(n), logicalBacklogTx, catchUpBatch, where)
			},
		}, nil
	}
}
