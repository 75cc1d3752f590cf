// Command batchcost measures where a 100-event Append spends the server's
// CPU, and what the GIN pending list (fastupdate) of events_tags would change
// for it and for the decision read of an entity (bench/PROFILE.md, "Batches
// and the GIN pending list").
//
//	go run ./bench/batchcost --dsn URL [--calls 30] [--rounds 5] [--prefill 50000] [--distinct] [--writers N]
//
// Variants, each in a schema of its own (pgdcb_batchcost_<hex>_<n>, dropped at
// the end) holding --prefill events of entities of 10 events:
//
//   - floor: the bench's floor, INSERT … SELECT FROM unnest of 100 rows into
//     a table with only the primary key;
//   - indexed: the same INSERT into a copy of events with all its indexes;
//   - append: Store.Append of the same 100 events (per-call path), and
//     append_events with the same events and no lock keys, called from SQL
//     (what the 102 keys cost);
//   - fastupdate on with the default pending-list limit (4 MB), with 64 kB,
//     and on with a gin_clean_pending_list call added to append_events after
//     its insert (the pending list is empty whenever no append is running).
//
// After each append of a GIN variant the entity read (Store.ReadAll of one
// entity's 10 events) runs on the same schema. Every variant runs in each
// round, one call of each after the other; the CPU is the backend's own run
// time (/proc/<pid>/schedstat, nanoseconds), so the server must run on this
// machine, and the figures stand against other load on it. WAL per call is
// read by EXPLAIN (ANALYZE, WAL) once per round. Last, one-event appends
// with the GIN off and cleaned by the append; with --writers N, also their
// rate at N writers (3 s each, alternated, per round).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
	"github.com/pgdcb/pgdcb/tags"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("PGDCB_DATABASE_URL"), "PostgreSQL URL of a server on this machine")
	calls := flag.Int("calls", 30, "calls per variant and round")
	rounds := flag.Int("rounds", 5, "rounds (median reported)")
	prefill := flag.Int("prefill", 50000, "events in each schema before measuring")
	flag.BoolVar(&distinct, "distinct", false, "a new account tag for every event, instead of bench's 100 accounts per writer")
	writers := flag.Int("writers", 0, "also one-event appends at this many writers, GIN off against cleaned by the append (appends/s)")
	flag.Parse()
	if err := run(context.Background(), *dsn, *calls, *rounds, *prefill, *writers); err != nil {
		fmt.Fprintln(os.Stderr, "batchcost:", err)
		os.Exit(1)
	}
}

const batch = 100

// A side is one schema with its own one-connection pool (so one backend,
// whose CPU is read from /proc).
type side struct {
	name   string // the GIN setting
	schema string
	q      string // quoted schema
	pool   *pgxpool.Pool
	st     *eventstore.Store
	pid    int
}

// A row is one measured operation.
type row struct {
	name      string
	side      *side
	op        func(ctx context.Context, seq int64) error
	read      bool      // an entity read after each call (GIN variants)
	walSQL    string    // the statement EXPLAIN reads WAL of ("" none)
	cpu, rcpu []float64 // µs per call / per read, per round
	wal       []float64 // bytes per call, per round
	records   []float64 // WAL records per call, per round
}

func run(ctx context.Context, dsn string, calls, rounds, prefill, writers int) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	base := "pgdcb_batchcost_" + hex.EncodeToString(b[:])
	gin := []struct{ name, set string }{
		{"off", "fastupdate = off"},
		{"on, 4 MB", "fastupdate = on"},
		{"on, 64 kB", "fastupdate = on, gin_pending_list_limit = 64"},
		{"on, cleaned by the append", "fastupdate = on"},
	}
	var sides []*side
	defer func() {
		for _, s := range sides {
			_, _ = s.pool.Exec(context.Background(), "DROP SCHEMA "+s.q+" CASCADE")
			s.pool.Close()
		}
	}()
	for i, g := range gin {
		s, err := newSide(ctx, dsn, base+"_"+strconv.Itoa(i), g.name, g.set, prefill)
		if err != nil {
			return err
		}
		sides = append(sides, s)
	}
	if err := cleanInAppend(ctx, sides[3]); err != nil {
		return err
	}
	off := sides[0]
	for _, stmt := range []string{
		`CREATE TABLE ` + off.q + `.floor_events (
			position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
			type text NOT NULL, tags text[] NOT NULL, data jsonb NOT NULL, metadata jsonb, event_id uuid,
			occurred_at timestamptz NOT NULL DEFAULT now())`,
		`CREATE TABLE ` + off.q + `.indexed_events (LIKE ` + off.q + `.events INCLUDING ALL)`,
		`INSERT INTO ` + off.q + `.indexed_events (type, tags, data) SELECT type, tags, data FROM ` + off.q + `.events`,
		`INSERT INTO ` + off.q + `.floor_events (type, tags, data) SELECT type, tags, data FROM ` + off.q + `.events`,
		`VACUUM ANALYZE ` + off.q + `.indexed_events`,
		`VACUUM ANALYZE ` + off.q + `.floor_events`,
	} {
		if _, err := off.pool.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	rows := []*row{
		{name: "floor: INSERT unnest 100 rows, primary key only", side: off, op: insertBatch(off, "floor_events"),
			walSQL: insertSQL(off, "floor_events")},
		{name: "INSERT unnest 100 rows into a copy of events (all indexes)", side: off, op: insertBatch(off, "indexed_events"),
			walSQL: insertSQL(off, "indexed_events")},
		{name: "append_events, 100 events, 102 shared lock keys (from SQL)", side: off, op: appendSQLOp(off, true)},
		{name: "append_events, 100 events, no lock keys (from SQL)", side: off, op: appendSQLOp(off, false)},
	}
	for _, s := range sides {
		rows = append(rows, &row{name: "Store.Append 100 events, GIN " + s.name, side: s, op: appendOp(s), read: true,
			walSQL: appendSQL(s, false)})
	}
	for _, s := range []*side{sides[0], sides[3]} {
		rows = append(rows, &row{name: "Store.Append 1 event, GIN " + s.name, side: s, op: appendOne(s)})
	}
	for r := 0; r < rounds; r++ {
		acc := make([]time.Duration, len(rows))
		racc := make([]time.Duration, len(rows))
		for c := 0; c < calls; c++ {
			for i, rw := range rows {
				seq := int64(r*calls + c)
				d, err := cpuOf(rw.side.pid, func() error { return rw.op(ctx, seq) })
				if err != nil {
					return fmt.Errorf("%s: %w", rw.name, err)
				}
				acc[i] += d
				if rw.read {
					d, err := cpuOf(rw.side.pid, func() error { return readEntity(ctx, rw.side, seq, prefill) })
					if err != nil {
						return fmt.Errorf("%s: read: %w", rw.name, err)
					}
					racc[i] += d
				}
			}
		}
		for i, rw := range rows {
			rw.cpu = append(rw.cpu, float64(acc[i].Microseconds())/float64(calls))
			if rw.read {
				rw.rcpu = append(rw.rcpu, float64(racc[i].Microseconds())/float64(calls))
			}
			if w, err := walOf(ctx, rw, int64(r)); err != nil {
				return fmt.Errorf("%s: wal: %w", rw.name, err)
			} else if w >= 0 {
				rw.wal = append(rw.wal, w)
			}
		}
		fmt.Fprintf(os.Stderr, "batchcost: round %d of %d\n", r+1, rounds)
	}
	if writers > 0 {
		if err := concurrent(ctx, dsn, []*side{sides[0], sides[3]}, writers, rounds); err != nil {
			return err
		}
	}
	fmt.Printf("| operation | server CPU µs per call | ÷ floor | WAL records, B per call | entity read µs |\n|---|---:|---:|---:|---:|\n")
	floor := med(rows[0].cpu)
	for _, rw := range rows {
		fmt.Printf("| %s | %.0f (%.0f–%.0f) | %.2f× | %s | %s |\n", rw.name, med(rw.cpu), minOf(rw.cpu), maxOf(rw.cpu),
			floor/med(rw.cpu), walCell(rw), spread(rw.rcpu))
	}
	return nil
}

func walCell(rw *row) string {
	if len(rw.wal) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f, %s", med(rw.records), spread(rw.wal))
}

func spread(x []float64) string {
	if len(x) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f (%.0f–%.0f)", med(x), minOf(x), maxOf(x))
}

// newSide migrates a schema, sets events_tags' options, fills it and opens
// its one-connection store.
func newSide(ctx context.Context, dsn, schema, name, set string, prefill int) (*side, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MinConns, cfg.MaxConns = 1, 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &side{name: name, schema: schema, q: pgx.Identifier{schema}.Sanitize(), pool: pool}
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, err
	}
	for _, stmt := range []string{
		`ALTER INDEX ` + s.q + `.events_tags SET (` + set + `)`,
		`INSERT INTO ` + s.q + `.events (type, tags, data)
			SELECT 'Filled', ARRAY['entity=' || (g % ` + strconv.Itoa(prefill/10) + `), 'shard=' || (g % 16)], '{"n":1}'
			FROM generate_series(1, ` + strconv.Itoa(prefill) + `) g`,
		`VACUUM ANALYZE ` + s.q + `.events`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return s, err
		}
	}
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&s.pid); err != nil {
		return s, err
	}
	if _, err := os.ReadFile(schedstat(s.pid)); err != nil {
		return s, fmt.Errorf("the server must run on this machine: %w", err)
	}
	s.st, err = eventstore.New(pool, &eventstore.Config{Schema: schema, GroupCommitDisabled: true, NotifyDisabled: true})
	return s, err
}

// cleanInAppend adds a gin_clean_pending_list call to s's append_events,
// after its insert.
func cleanInAppend(ctx context.Context, s *side) error {
	var def string
	if err := s.pool.QueryRow(ctx, `SELECT pg_get_functiondef(p.oid) FROM pg_proc p
		WHERE p.proname = 'append_events' AND p.pronamespace = $1::regnamespace`, s.q).Scan(&def); err != nil {
		return err
	}
	const anchor = "    tx := pg_current_xact_id();"
	if strings.Count(def, anchor) != 1 {
		return errors.New("append_events: the anchor of the cleaning call is not in its text")
	}
	def = strings.Replace(def, anchor, "    PERFORM pg_catalog.gin_clean_pending_list('"+s.q+".events_tags'::regclass);\n"+anchor, 1)
	_, err := s.pool.Exec(ctx, def)
	return err
}

func schedstat(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/schedstat" }

// cpuOf is the run time backend pid spent while f ran.
func cpuOf(pid int, f func() error) (time.Duration, error) {
	before, err := runTime(pid)
	if err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	after, err := runTime(pid)
	return after - before, err
}

func runTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(schedstat(pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("empty schedstat")
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns), err
}

// distinct gives every event an account of its own (--distinct).
var distinct bool

// benchEvent is bench's event: two tags, about 60 bytes of JSON. Its
// account tag repeats every 100 events, as in bench, unless distinct.
func benchEvent(seq int64) pgdcb.Event {
	acct := seq % 100
	if distinct {
		acct = seq
	}
	ts := []string{"account=0-" + strconv.FormatInt(acct, 10), "writer=0"}
	data := `{"n":` + strconv.FormatInt(seq, 10) + `,"amount":42,"note":"benchmark payload"}`
	return pgdcb.Event{Type: "BenchAppended", Tags: tags.MustParseSet(ts...), Data: json.RawMessage(data)}
}

func events(seq int64) []pgdcb.Event {
	evs := make([]pgdcb.Event, batch)
	for i := range evs {
		evs[i] = benchEvent(seq*batch + int64(i))
	}
	return evs
}

func appendOp(s *side) func(context.Context, int64) error {
	return func(ctx context.Context, seq int64) error {
		res, err := s.st.Append(ctx, events(seq))
		if err == nil && len(res.Positions) != batch {
			err = fmt.Errorf("%d positions", len(res.Positions))
		}
		return err
	}
}

func appendOne(s *side) func(context.Context, int64) error {
	return func(ctx context.Context, seq int64) error {
		_, err := s.st.Append(ctx, []pgdcb.Event{benchEvent(seq)})
		return err
	}
}

// concurrent runs one-event appends at writers writers for 3 s on each
// side in turn, rounds times, and prints the appends per second.
func concurrent(ctx context.Context, dsn string, sides []*side, writers, rounds int) error {
	rates := make([][]float64, len(sides))
	for r := 0; r < rounds; r++ {
		for i, s := range sides {
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				return err
			}
			cfg.MaxConns = int32(writers)
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				return err
			}
			st, err := eventstore.New(pool, &eventstore.Config{Schema: s.schema, GroupCommitDisabled: true, NotifyDisabled: true})
			if err != nil {
				pool.Close()
				return err
			}
			var done atomic.Int64
			errs := make(chan error, writers)
			end := time.Now().Add(3 * time.Second)
			for w := 0; w < writers; w++ {
				go func() {
					for seq := int64(0); time.Now().Before(end); seq++ {
						e := benchEvent(seq)
						e.Tags = tags.MustParseSet("account="+strconv.Itoa(w)+"-"+strconv.FormatInt(seq%100, 10), "writer="+strconv.Itoa(w))
						if _, err := st.Append(ctx, []pgdcb.Event{e}); err != nil {
							errs <- err
							return
						}
						done.Add(1)
					}
					errs <- nil
				}()
			}
			for w := 0; w < writers; w++ {
				if e := <-errs; e != nil && err == nil {
					err = e
				}
			}
			pool.Close()
			if err != nil {
				return fmt.Errorf("%d writers, GIN %s: %w", writers, s.name, err)
			}
			rates[i] = append(rates[i], float64(done.Load())/3)
		}
	}
	for i, s := range sides {
		fmt.Printf("Store.Append 1 event at %d writers, GIN %s: %s appends/s\n", writers, s.name, spread(rates[i]))
	}
	return nil
}

// columns are the bench batch's columns as the floor's INSERT sends them.
func columns(seq int64) (ty, a, b, d []string) {
	for _, e := range events(seq) {
		ts := e.Tags.Strings()
		ty, a, b, d = append(ty, e.Type), append(a, ts[0]), append(b, ts[1]), append(d, string(e.Data))
	}
	return ty, a, b, d
}

// insertSQL is bench's floor statement into table.
func insertSQL(s *side, table string) string {
	return `INSERT INTO ` + s.q + `.` + table + ` (type, tags, data)
		SELECT t, ARRAY[a, b], d::jsonb FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(t, a, b, d)`
}

func insertBatch(s *side, table string) func(context.Context, int64) error {
	sql := insertSQL(s, table)
	return func(ctx context.Context, seq int64) error {
		ty, a, b, d := columns(seq)
		_, err := s.pool.Exec(ctx, sql, ty, a, b, d)
		return err
	}
}

// appendSQL calls append_events with the batch's columns ($1 to $4), and
// with 102 shared lock keys (as many as the Store takes for the batch: its
// type, its 101 tags, the global key) or none: the difference is what the
// keys cost.
func appendSQL(s *side, keys bool) string {
	k := `'{}', '{}'`
	if keys {
		k = `(SELECT array_agg(k ORDER BY k) FROM generate_series(1, 102) k), array_fill(false, ARRAY[102])`
	}
	return `SELECT status FROM ` + s.q + `.append_events($1::text[], array_fill(2, ARRAY[100]),
		(SELECT array_agg(x ORDER BY o) FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(a, b, o), LATERAL (VALUES (a), (b)) v(x)),
		$4::jsonb[], array_fill(NULL::jsonb, ARRAY[100]), array_fill(NULL::uuid, ARRAY[100]),
		` + k + `, '{}', '{}', '{}', '{}', '{}', '0', 0, NULL, NULL)`
}

func appendSQLOp(s *side, keys bool) func(context.Context, int64) error {
	sql := appendSQL(s, keys)
	return func(ctx context.Context, seq int64) error {
		ty, a, b, d := columns(seq)
		var st string
		if err := s.pool.QueryRow(ctx, sql, ty, a, b, d).Scan(&st); err != nil {
			return err
		}
		if st != "ok" {
			return fmt.Errorf("status %q", st)
		}
		return nil
	}
}

// readEntity is the decision read: Store.ReadAll of one entity's 10 events.
func readEntity(ctx context.Context, s *side, seq int64, prefill int) error {
	ent := (seq * 7919) % int64(prefill/10)
	evs, _, err := s.st.ReadAll(ctx, query.Tagged(nil, "entity="+strconv.FormatInt(ent, 10)), nil)
	if err == nil && len(evs) != 10 {
		err = fmt.Errorf("read %d events of entity %d, want 10", len(evs), ent)
	}
	return err
}

// walOf is the WAL one call of rw writes, by EXPLAIN (ANALYZE, WAL) of its
// statement (its nested statements included); -1 when rw has none. The
// Store's appends are read through append_events called from SQL with the
// same events on rw's schema (lock keys write no WAL). One call per round:
// a pending list's occasional flush by the insert that overflows it is
// missed.
func walOf(ctx context.Context, rw *row, seq int64) (float64, error) {
	sql := rw.walSQL
	if sql == "" {
		return -1, nil
	}
	ty, a, b, d := columns(1_000_000 + seq)
	var plan []map[string]any
	if err := rw.side.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, WAL, FORMAT JSON) `+sql, ty, a, b, d).Scan(&plan); err != nil {
		return 0, err
	}
	p, _ := plan[0]["Plan"].(map[string]any)
	w, _ := p["WAL Bytes"].(float64)
	n, _ := p["WAL Records"].(float64)
	rw.records = append(rw.records, n)
	return w, nil
}

func med(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func minOf(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s[0]
}

func maxOf(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s[len(s)-1]
}
