package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// SchemaPrefix starts the name of the schema the study creates; only such a
// schema is ever dropped.
const SchemaPrefix = "pgdcb_scale_"

// errDiskShort stops the study before (or while) loading when the disk of
// the server's data directory cannot hold what is left to load.
var errDiskShort = errors.New("not enough free disk")

// newSchema creates and migrates a fresh schema pgdcb_scale_<hex>.
func newSchema(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	schema := SchemaPrefix + hex.EncodeToString(b[:])
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		return schema, fmt.Errorf("migrating %s: %w", schema, err)
	}
	// The floor of the append rows: bench/env.go's floor_events (the
	// columns and defaults of events, no index but the primary key, no
	// trigger), filled by the same autocommit one-row INSERT.
	if _, err := pool.Exec(ctx, `CREATE TABLE `+pgx.Identifier{schema, "floor_events"}.Sanitize()+` (
		position       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		transaction_id xid8        NOT NULL DEFAULT pg_current_xact_id(),
		type           text        NOT NULL,
		tags           text[]      NOT NULL,
		data           jsonb       NOT NULL,
		metadata       jsonb,
		event_id       uuid,
		occurred_at    timestamptz NOT NULL DEFAULT now())`); err != nil {
		return schema, fmt.Errorf("creating the floor table: %w", err)
	}
	return schema, nil
}

// dropSchema drops the study's schema (refusing any other), even when ctx is
// cancelled.
func dropSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if !strings.HasPrefix(schema, SchemaPrefix) {
		return fmt.Errorf("refusing to drop %q: not a %s* schema", schema, SchemaPrefix)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Minute)
	defer cancel()
	_, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

// disk reads the free space of the server's data directory, which must be
// visible to this program (a local server).
type disk struct {
	dir     string
	reserve int64 // kept free whatever happens: WAL, temporary files
}

func (d *disk) free() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.dir, &st); err != nil {
		return 0, fmt.Errorf("free space of the server's data directory %s (run on the server's machine, or --disk-check=false): %w", d.dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// diskMargin covers what a sample's bytes per event underestimates: index
// pages split as the indexes grow, VACUUM's maps, WAL not yet recycled.
const diskMargin = 1.3

// check returns errDiskShort when the disk cannot hold events more events
// of bytesPerEvent (with diskMargin) and the reserve.
func (d *disk) check(events int64, bytesPerEvent float64) (need, free int64, err error) {
	free, err = d.free()
	if err != nil {
		return 0, 0, err
	}
	need = int64(float64(events)*bytesPerEvent*diskMargin) + d.reserve
	if need > free {
		return need, free, fmt.Errorf("%w: %d more events at %.0f bytes each (×%.1f) and a reserve of %s need %s, the data directory's disk has %s",
			errDiskShort, events, bytesPerEvent, diskMargin, gib(d.reserve), gib(need), gib(free))
	}
	return need, free, nil
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// loadStats is what loading one stage took.
type loadStats struct {
	Events       int64
	Transactions int64
	Seconds      float64
	// IndexSeconds is the time spent re-creating the indexes
	// (--rebuild-indexes), included in Seconds.
	IndexSeconds float64
	// ServerCPU is the loading backend's CPU time (from /proc: a local
	// server; 0 when unreadable), ClientCPU this program's: on a busy
	// machine, events per CPU second predict a quiet machine's rate better
	// than the wall time.
	ServerCPU, ClientCPU float64
}

// procCPU is the user+system CPU time of process pid, from /proc.
func procCPU(pid int) (float64, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the line, in clock ticks (100 per second).
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (u + st) / 100, true
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// loader appends generated events to the study's events table: COPY into
// events in transactions of txEvents rows on one connection with
// synchronous_commit off. Every event gets a UUIDv7 event_id, as the first
// event of every Append call on the pool does (one-event calls: every
// event). The other columns take their defaults, as an append's row does:
// position from the identity, transaction_id the loading transaction's,
// occurred_at its start; metadata stays NULL.
type loader struct {
	pool     *pgxpool.Pool
	schema   string
	txEvents int
	rebuild  bool
	disk     *disk // nil: no disk checks
	logf     func(string, ...any)
}

// load appends the stage's events.
func (l *loader) load(ctx context.Context, spec stageSpec) (loadStats, error) {
	st := loadStats{}
	start := time.Now()
	var dropped []string
	if l.rebuild {
		defs, err := l.dropIndexes(ctx)
		if err != nil {
			return st, err
		}
		dropped = defs
	}
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return st, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		return st, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `RESET synchronous_commit`) //nolint:errcheck
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return st, err
	}
	srv0, srvOK := procCPU(pid)
	cli0 := selfCPU()

	// The generator runs ahead on its own goroutine, a few chunks deep.
	chunks := make(chan [][]any, 4)
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	go func() {
		defer close(chunks)
		g := newGenerator(spec)
		for !g.done() {
			rows := make([][]any, 0, l.txEvents)
			for len(rows) < l.txEvents && !g.done() {
				ev := g.nextEvent()
				id, err := uuid.NewV7()
				if err != nil {
					panic(err) // crypto/rand failed
				}
				rows = append(rows, []any{ev.Type, ev.Tags, ev.Data, pgtype.UUID{Bytes: id, Valid: true}})
			}
			select {
			case chunks <- rows:
			case <-genCtx.Done():
				return
			}
		}
	}()
	table := pgx.Identifier{l.schema, "events"}
	lastLog := time.Now()
	for rows := range chunks {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return st, err
		}
		if _, err := tx.CopyFrom(ctx, table, []string{"type", "tags", "data", "event_id"}, pgx.CopyFromRows(rows)); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return st, fmt.Errorf("copying into events: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return st, err
		}
		st.Events += int64(len(rows))
		st.Transactions++
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			el := time.Since(start).Seconds()
			l.logf("  loaded %d of %d events (%.0f events/s)", st.Events, spec.Count, float64(st.Events)/el)
			if l.disk != nil {
				if free, err := l.disk.free(); err != nil {
					return st, err
				} else if free < l.disk.reserve {
					return st, fmt.Errorf("%w: %s left, below the reserve of %s", errDiskShort, gib(free), gib(l.disk.reserve))
				}
			}
		}
	}
	if st.Events != spec.Count {
		return st, fmt.Errorf("loaded %d events, want %d", st.Events, spec.Count)
	}
	if srv1, ok := procCPU(pid); ok && srvOK {
		st.ServerCPU = srv1 - srv0
	}
	st.ClientCPU = selfCPU() - cli0
	if len(dropped) > 0 {
		t0 := time.Now()
		for _, def := range dropped {
			if _, err := l.pool.Exec(ctx, def); err != nil {
				return st, fmt.Errorf("re-creating an index (%s): %w", def, err)
			}
		}
		st.IndexSeconds = time.Since(t0).Seconds()
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// dropIndexes drops every index of events but its primary key and returns
// their definitions, to be run again after the load.
func (l *loader) dropIndexes(ctx context.Context) ([]string, error) {
	rows, err := l.pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		 WHERE schemaname = $1 AND tablename = 'events' AND indexname <> 'events_pkey' ORDER BY indexname`, l.schema)
	if err != nil {
		return nil, err
	}
	type ix struct{ name, def string }
	ixs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ix, error) {
		var i ix
		return i, r.Scan(&i.name, &i.def)
	})
	if err != nil {
		return nil, err
	}
	var defs []string
	for _, i := range ixs {
		if _, err := l.pool.Exec(ctx, `DROP INDEX `+pgx.Identifier{l.schema, i.name}.Sanitize()); err != nil {
			return nil, err
		}
		defs = append(defs, i.def)
	}
	return defs, nil
}

// checkLog verifies that the stage's events are what appends would have
// made: count events at positions after from, gapless, transaction ids never
// smaller than the event's before (one pass in position order). It returns
// the number of distinct transaction ids of the stage.
func checkLog(ctx context.Context, pool *pgxpool.Pool, schema string, from, count int64) (txs int64, err error) {
	q := pgx.Identifier{schema, "events"}.Sanitize()
	var lo, hi, n, back int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(min(position), 0), coalesce(max(position), 0), count(*),
		       count(*) FILTER (WHERE prev IS NULL OR transaction_id <> prev), count(*) FILTER (WHERE transaction_id < prev)
		  FROM (SELECT position, transaction_id, lag(transaction_id) OVER (ORDER BY position) AS prev
		          FROM `+q+` WHERE position >= $1) t WHERE position > $2`, max(from, 1), from).
		Scan(&lo, &hi, &n, &txs, &back); err != nil {
		return 0, err
	}
	if n != count || hi-lo+1 != count {
		return txs, fmt.Errorf("SELF-CHECK FAILED: the stage's events are at positions %d..%d, %d rows; want %d gapless rows", lo, hi, n, count)
	}
	if back != 0 {
		return txs, fmt.Errorf("SELF-CHECK FAILED: %d events have a smaller transaction id than the event before them", back)
	}
	return txs, nil
}

// sampleEvents is the size of the sample whose bytes per event estimate the
// disk the study needs.
const sampleEvents = 100_000

// sampleBytesPerEvent loads sampleEvents events of the study's shape into a
// scratch schema, every index maintained, and returns the events table's
// total size (heap, indexes, TOAST) per event; the schema is dropped.
func sampleBytesPerEvent(ctx context.Context, pool *pgxpool.Pool, txEvents int, logf func(string, ...any)) (float64, error) {
	schema, err := newSchema(ctx, pool)
	defer func() {
		if schema != "" {
			if derr := dropSchema(ctx, pool, schema); derr != nil {
				logf("dropping the sample schema %s: %v", schema, derr)
			}
		}
	}()
	if err != nil {
		return 0, err
	}
	ld := &loader{pool: pool, schema: schema, txEvents: txEvents, logf: logf}
	if _, err := ld.load(ctx, stageSpec{Count: sampleEvents, Probes: 100, LongEvents: 1000, Seed: 1}); err != nil {
		return 0, fmt.Errorf("loading the disk sample: %w", err)
	}
	var total int64
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, pgx.Identifier{schema, "events"}.Sanitize()).Scan(&total); err != nil {
		return 0, err
	}
	return float64(total) / sampleEvents, nil
}
