package eventstore_test

// Speed against floors measured in the same run on the same server:
//
//	go test ./eventstore -run '^$' -bench . -benchtime 3s
//
// The floors write the same columns into an unindexed table (primary key
// only) with autocommit: a single-row INSERT, and a 100-row INSERT … SELECT
// unnest(…). Compare events/s of a floor and its workload to get the ratio.
// The floor-indexed runs do the same into a copy of the events table with
// all its indexes: the part of the gap that the indexes alone cost.

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/query"
)

func floorTable(b *testing.B, s *eventstore.Store, pool *pgxpool.Pool) string {
	tbl := ident.Schema(s) + ".floor_events"
	_, err := pool.Exec(context.Background(), `CREATE TABLE `+tbl+` (
		position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
		type text NOT NULL, tags text[] NOT NULL, data jsonb NOT NULL, metadata jsonb,
		event_id uuid, occurred_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(b, err)
	return tbl
}

// indexedFloorTable is a copy of the events table with all its indexes (not
// its triggers): a plain INSERT into it costs what the indexes cost, without
// the locks, checks and function call of an append. It is the floor that the
// mechanism itself can be judged against.
func indexedFloorTable(b *testing.B, s *eventstore.Store, pool *pgxpool.Pool) string {
	tbl := ident.Schema(s) + ".floor_indexed"
	_, err := pool.Exec(context.Background(), `CREATE TABLE `+tbl+` (LIKE `+ident.Schema(s)+`.events INCLUDING ALL)`)
	require.NoError(b, err)
	return tbl
}

func reportRate(b *testing.B, events int64) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

var seq atomic.Int64

func benchWriters(b *testing.B, writers int, op func(ctx context.Context, n int64) error) {
	ctx := context.Background()
	b.ResetTimer()
	if writers == 1 {
		for b.Loop() {
			if err := op(ctx, seq.Add(1)); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism((writers + 1) / 2) // GOMAXPROCS=2 here: 2×4 = 8 goroutines
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx, seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAppendOne: one event per call, against the single-row floor, with
// 1 and 8 writers on distinct boundaries.
func BenchmarkAppendOne(b *testing.B) {
	s, pool := newStore(b, &eventstore.Config{NotifyDisabled: os.Getenv("BENCH_NO_NOTIFY") != ""})
	tbl, indexed := floorTable(b, s, pool), indexedFloorTable(b, s, pool)
	for _, writers := range []int{1, 8} {
		for _, f := range [][2]string{{"floor", tbl}, {"floor-indexed", indexed}} {
			name, into := f[0], f[1]
			b.Run(fmt.Sprintf("%s/writers=%d", name, writers), func(b *testing.B) {
				benchWriters(b, writers, func(ctx context.Context, n int64) error {
					_, err := pool.Exec(ctx, "INSERT INTO "+into+" (type, tags, data) VALUES ($1, $2, $3)",
						"Deposited", []string{fmt.Sprintf("account=a%d", n)}, `{"amount": 10}`)
					return err
				})
				reportRate(b, int64(b.N))
			})
		}
		b.Run(fmt.Sprintf("Append/writers=%d", writers), func(b *testing.B) {
			benchWriters(b, writers, func(ctx context.Context, n int64) error {
				_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, fmt.Sprintf("account=a%d", n))})
				return err
			})
			reportRate(b, int64(b.N))
		})
		b.Run(fmt.Sprintf("AppendIf/writers=%d", writers), func(b *testing.B) {
			benchWriters(b, writers, func(ctx context.Context, n int64) error {
				tag := fmt.Sprintf("account=b%d", n)
				_, err := s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, tag)},
					appendif.FailIf(query.Tagged(nil, tag), nil))
				return err
			})
			reportRate(b, int64(b.N))
		})
	}
}

// BenchmarkAppendBatch100: 100-event batches against a 100-row INSERT … SELECT
// unnest floor.
func BenchmarkAppendBatch100(b *testing.B) {
	s, pool := newStore(b, nil)
	tbl, indexed := floorTable(b, s, pool), indexedFloorTable(b, s, pool)
	const size = 100
	for _, f := range [][2]string{{"floor", tbl}, {"floor-indexed", indexed}} {
		name, into := f[0], f[1]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			types, data := make([]string, size), make([]string, size)
			tagsCol := make([]string, size)
			for b.Loop() {
				n := seq.Add(1)
				for i := range size {
					types[i], data[i] = "Deposited", `{"amount": 10}`
					tagsCol[i] = fmt.Sprintf("account=f%d-%d", n, i)
				}
				_, err := pool.Exec(ctx, "INSERT INTO "+into+" (type, tags, data) SELECT t, ARRAY[g], d::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS u(t, g, d)",
					types, tagsCol, data)
				require.NoError(b, err)
			}
			reportRate(b, int64(b.N)*size)
		})
	}
	b.Run("Append", func(b *testing.B) {
		ctx := context.Background()
		batch := make([]pgdcb.Event, size)
		for b.Loop() {
			n := seq.Add(1)
			for i := range size {
				batch[i] = pgdcb.MustEvent("Deposited", map[string]int{"amount": 10}, fmt.Sprintf("account=g%d-%d", n, i))
			}
			_, err := s.Append(ctx, batch)
			require.NoError(b, err)
		}
		reportRate(b, int64(b.N)*size)
	})
}

// loadEvents fills the store fast with n events over n/50 entities (50 each),
// bypassing append_events, then ANALYZEs.
func loadEvents(b testing.TB, s *eventstore.Store, pool *pgxpool.Pool, n int) {
	loadEntities(b, s, pool, n, 50)
}

// loadEntities is loadEvents with perEntity events per entity (account=g/perEntity).
func loadEntities(b testing.TB, s *eventstore.Store, pool *pgxpool.Pool, n, perEntity int) {
	ctx := context.Background()
	start := time.Now()
	_, err := pool.Exec(ctx, `INSERT INTO `+ident.Schema(s)+`.events (type, tags, data)
		SELECT CASE WHEN g % 10 = 0 THEN 'Opened' ELSE 'Deposited' END,
		       ARRAY['account=' || (g / $2), 'shard=' || (g % 16)], jsonb_build_object('amount', g % 100)
		  FROM generate_series(0, $1 - 1) AS g`, n, perEntity)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, "ANALYZE "+ident.Schema(s)+".events")
	require.NoError(b, err)
	b.Logf("loaded %d events in %s", n, time.Since(start).Round(time.Millisecond))
}

// BenchmarkReadEntity: one entity's 50 events (a decision read) at 10k and 1M
// events in the table; the cost should barely grow. The floor, in the same
// run: the same rows by a hand-written SELECT with pgx (no snapshot, no head,
// no tag parsing), as the bench program's read floor.
func BenchmarkReadEntity(b *testing.B) {
	for _, size := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("events=%d", size), func(b *testing.B) {
			s, pool := newStore(b, nil)
			loadEvents(b, s, pool, size)
			ctx := context.Background()
			entities := int64(size / 50)
			b.Run("floor", func(b *testing.B) {
				for b.Loop() {
					rows, err := pool.Query(ctx, `SELECT position, transaction_id::text, type, tags, data, metadata, event_id, occurred_at
						FROM `+ident.Schema(s)+`.events WHERE tags @> $1 ORDER BY transaction_id, position`,
						[]string{fmt.Sprintf("account=%d", seq.Add(1)%entities)})
					require.NoError(b, err)
					n := 0
					for rows.Next() {
						var (
							pos        int64
							tx, typ    string
							tgs        []string
							data, meta []byte
							id         pgtype.UUID
							at         pgtype.Timestamptz
						)
						require.NoError(b, rows.Scan(&pos, &tx, &typ, &tgs, &data, &meta, &id, &at))
						n++
					}
					require.NoError(b, rows.Err())
					require.Equal(b, 50, n)
				}
				reportRate(b, int64(b.N)*50)
			})
			b.Run("read", func(b *testing.B) {
				for b.Loop() {
					q := query.Tagged(nil, fmt.Sprintf("account=%d", seq.Add(1)%entities))
					evs, _, err := s.ReadAll(ctx, q, nil)
					require.NoError(b, err)
					require.Len(b, evs, 50)
				}
				reportRate(b, int64(b.N)*50)
			})
		})
	}
}

// BenchmarkAppendIfLargeTable: a conditional append on an existing entity with
// a fresh decision cursor, at 1M events.
func BenchmarkAppendIfLargeTable(b *testing.B) {
	s, pool := newStore(b, nil)
	loadEvents(b, s, pool, 1_000_000)
	ctx := context.Background()
	for b.Loop() {
		q := query.Tagged(nil, fmt.Sprintf("account=%d", seq.Add(1)%20000))
		_, cur, err := s.ReadAll(ctx, q, &pgdcb.ReadOptions{Backwards: true, Limit: 1})
		require.NoError(b, err)
		_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, q.Items()[0].Tags.Strings()...)}, appendif.FailIf(q, &cur))
		require.NoError(b, err)
	}
	reportRate(b, int64(b.N))
}

// BenchmarkDecisionCycle: the cycle users run, read → decide → AppendIf: fold
// one entity's 10 events (Project, one read), then append one event with the
// read's condition and cursor. 100k events preloaded (10k entities); each
// cycle takes the next entity, so concurrent writers do not conflict. The
// floor (same run) is the single-row autocommit INSERT into an unindexed
// table: ratio = cycles/s ÷ floor rows/s.
func BenchmarkDecisionCycle(b *testing.B) {
	s, pool := newStore(b, nil)
	tbl := floorTable(b, s, pool)
	const entities = 10_000
	loadEntities(b, s, pool, entities*10, 10)
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("floor/writers=%d", writers), func(b *testing.B) {
			benchWriters(b, writers, func(ctx context.Context, n int64) error {
				_, err := pool.Exec(ctx, "INSERT INTO "+tbl+" (type, tags, data) VALUES ($1, $2, $3)",
					"Deposited", []string{fmt.Sprintf("account=%d", n%entities)}, `{"amount": 10}`)
				return err
			})
			reportRate(b, int64(b.N))
		})
		b.Run(fmt.Sprintf("cycle/writers=%d", writers), func(b *testing.B) {
			benchWriters(b, writers, func(ctx context.Context, n int64) error {
				tag := fmt.Sprintf("account=%d", n%entities)
				balance := pgdcb.NewModel(query.Tagged(nil, tag), 0, func(sum int, ev pgdcb.StoredEvent) int { return sum + len(ev.Data) })
				cond, err := s.Project(ctx, balance)
				if err != nil {
					return err
				}
				_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]int{"amount": balance.State % 100}, tag)}, cond)
				return err
			})
			reportRate(b, int64(b.N))
		})
	}
}
