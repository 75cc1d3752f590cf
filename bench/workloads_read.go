package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

// Table sizes of the read workloads: 10k (also under --quick), 1M, and 10M
// under --large.
// readWorkloads are the built-in read workloads, in run order.
func readWorkloads() []Workload {
	var ws []Workload
	register := func(w ...Workload) { ws = append(ws, w...) }
	for _, size := range []int{10_000, 1_000_000, 10_000_000} {
		quick, large := size == 10_000, size == 10_000_000
		sfx := "/" + sizeName(size)
		register(
			Workload{Name: "read/project-entity" + sfx, Group: "read", Writers: 1, Fixture: size, Quick: quick, Large: large, Prepare: prepareProject},
			Workload{Name: "read/last-event" + sfx, Group: "read", Writers: 1, Fixture: size, Quick: quick, Large: large, Prepare: prepareReadLast},
			Workload{Name: "read/type-stream" + sfx, Group: "read", Writers: 1, Fixture: size, Quick: quick, Large: large, Prepare: prepareTypeStream},
		)
		if !large {
			register(upcastWorkloads(size, quick, large)...)
		}
	}
	return ws
}

func sizeName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// randomEntity picks the entity a read is about; each writer has its own
// generator so reads do not all hit one cached entity.
func randomEntity(env *Env, w int, seq int64) string {
	r := rand.New(rand.NewPCG(uint64(w)+1, uint64(seq)))
	return "entity=" + strconv.Itoa(r.IntN(entities(env.Fixture)))
}

// rawRows is the floor of a read: the same SELECT of the same columns, by
// hand with pgx, on the same table and index, scanned into the same Go types,
// without the store (no query building, no snapshot, no tag parsing).
func rawRows(ctx context.Context, env *Env, where string, arg any) (int, error) {
	rows, err := env.Pool.Query(ctx, `SELECT e.position, e.transaction_id, e.type, e.tags, e.data, e.metadata, e.event_id, e.occurred_at
		FROM `+env.Q+`.events e WHERE `+where, arg)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			pos  int64
			tx   uint64
			typ  string
			tgs  []string
			data []byte
			meta []byte
			id   pgtype.UUID
			at   time.Time
		)
		if err := rows.Scan(&pos, &tx, &typ, &tgs, &data, &meta, &id, &at); err != nil {
			return 0, err
		}
		n++
	}
	return n, rows.Err()
}

// prepareProject: the decision model of one entity (50 events) with Project.
func prepareProject(_ context.Context, env *Env) (*Plan, error) {
	return &Plan{
		Op: func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
			m := pgdcb.NewModel(query.Tagged(nil, randomEntity(env, w, seq)), 0,
				func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
			if _, err := env.Store.Project(ctx, m); err != nil {
				return 0, err
			}
			if m.State != entityEvents {
				return 0, fmt.Errorf("SELF-CHECK FAILED: Project folded %d events, want %d", m.State, entityEvents)
			}
			return m.State, nil
		},
		// events_tags (GIN) then a sort of 50 rows, as the store's read.
		Floor: func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
			n, err := rawRows(ctx, env, `e.tags @> $1::text[] ORDER BY e.transaction_id, e.position`, []string{randomEntity(env, w, seq)})
			if err == nil && n != entityEvents {
				err = fmt.Errorf("SELF-CHECK FAILED: raw read returned %d events, want %d", n, entityEvents)
			}
			return n, err
		},
		FloorName: "raw SELECT",
	}, nil
}

// prepareReadLast: the last event of one entity (the gapless-number read).
func prepareReadLast(_ context.Context, env *Env) (*Plan, error) {
	return &Plan{
		Op: func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
			tag := randomEntity(env, w, seq)
			ev, _, err := env.Store.ReadLast(ctx, query.Tagged(nil, tag))
			if err != nil {
				return 0, err
			}
			if ev == nil {
				return 0, fmt.Errorf("SELF-CHECK FAILED: ReadLast found no event tagged %s", tag)
			}
			return 1, nil
		},
		Floor: func(ctx context.Context, w int, seq int64, _ *Counters) (int, error) {
			// events_tags (GIN) for the entity's rows, then the top one.
			// OFFSET 0 keeps the planner from the tempting plan of a
			// backward scan of events_log_order filtered by tag, which at
			// 1M events walks far more rows than the entity has; the floor
			// is the best hand-written query.
			n, err := rawRows(ctx, env, `e.position IN (SELECT position FROM (SELECT position, transaction_id FROM `+env.Q+`.events
				WHERE tags @> $1::text[] OFFSET 0) t ORDER BY transaction_id DESC, position DESC LIMIT 1)`, []string{randomEntity(env, w, seq)})
			if err == nil && n != 1 {
				err = fmt.Errorf("SELF-CHECK FAILED: raw last-event read returned %d rows", n)
			}
			return n, err
		},
		FloorName: "raw SELECT",
	}, nil
}

// prepareTypeStream: a type-only query (1000 events at every table size)
// streamed in full with Read(…).All().
func prepareTypeStream(_ context.Context, env *Env) (*Plan, error) {
	q := query.New(query.Item{Types: []string{markerType}})
	return &Plan{
		Op: func(ctx context.Context, _ int, _ int64, _ *Counters) (int, error) {
			n := 0
			for _, err := range env.Store.Read(ctx, q, nil).All() {
				if err != nil {
					return 0, err
				}
				n++
			}
			if n != markerEvents {
				return 0, fmt.Errorf("SELF-CHECK FAILED: type query streamed %d events, want %d", n, markerEvents)
			}
			return n, nil
		},
		// events_type_log_order: one type, already in log order.
		Floor: func(ctx context.Context, _ int, _ int64, _ *Counters) (int, error) {
			n, err := rawRows(ctx, env, `e.type = $1 ORDER BY e.transaction_id, e.position`, markerType)
			if err == nil && n != markerEvents {
				err = fmt.Errorf("SELF-CHECK FAILED: raw type read returned %d rows", n)
			}
			return n, err
		},
		FloorName: "raw SELECT",
	}, nil
}
