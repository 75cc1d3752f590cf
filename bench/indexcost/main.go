// Command indexcost measures what each index of the events table costs an
// append: WAL bytes and server CPU per one-row autocommit INSERT of the
// bench's event shape, into a copy of events with only the primary key (the
// floor), with the primary key and one of the other indexes, and with every
// index (bench/PROFILE.md, "The index set").
//
//	go run ./bench/indexcost --dsn URL [--rows 2000] [--rounds 5]
//
// Use a cluster of its own (a throwaway one): WAL is read cluster-wide
// (pg_current_wal_lsn) and the server CPU is the backend's own user+system
// time from /proc, so the server must run on this machine and nothing else
// should write to it. Every variant runs in each round, one after the other
// on one connection; the median over the rounds is reported. The schema
// (pgdcb_idxcost_<hex>) is dropped at the end.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("PGDCB_DATABASE_URL"), "PostgreSQL URL of a cluster nothing else writes to")
	rows := flag.Int("rows", 2000, "INSERTs per variant and round")
	rounds := flag.Int("rounds", 5, "rounds (median reported)")
	flag.Parse()
	if err := run(context.Background(), *dsn, *rows, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "indexcost:", err)
		os.Exit(1)
	}
}

type variant struct {
	name  string
	table string
	wal   []float64 // bytes per row, per round
	cpu   []float64 // µs per row, per round
}

func run(ctx context.Context, dsn string, rows, rounds int) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "pgdcb_idxcost_" + hex.EncodeToString(b[:])
	q := pgx.Identifier{schema}.Sanitize()
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+q+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		return err
	}
	if _, err := runstore.Migrate(ctx, pool, schema); err != nil {
		return err
	}
	// The indexes of events, but its primary key.
	type index struct{ name, def string }
	var idx []index
	r, err := pool.Query(ctx, `SELECT c.relname, pg_get_indexdef(i.indexrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = ($1 || '.events')::regclass AND NOT i.indisprimary ORDER BY c.relname`, q)
	if err != nil {
		return err
	}
	for r.Next() {
		var x index
		if err := r.Scan(&x.name, &x.def); err != nil {
			return err
		}
		idx = append(idx, x)
	}
	if err := r.Err(); err != nil {
		return err
	}
	mk := func(name string, defs ...string) (*variant, error) {
		t := q + "." + pgx.Identifier{"t_" + name}.Sanitize()
		if _, err := pool.Exec(ctx, `CREATE TABLE `+t+` (LIKE `+q+`.events INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING GENERATED)`); err != nil {
			return nil, err
		}
		if _, err := pool.Exec(ctx, `ALTER TABLE `+t+` ADD PRIMARY KEY (position)`); err != nil {
			return nil, err
		}
		for _, d := range defs {
			on := " ON " + schema + ".events "
			i := strings.Index(d, on)
			if i < 0 {
				return nil, fmt.Errorf("unexpected index definition %q", d)
			}
			create := "CREATE INDEX ON "
			if strings.HasPrefix(d, "CREATE UNIQUE INDEX") {
				create = "CREATE UNIQUE INDEX ON "
			}
			d = create + t + " " + d[i+len(on):]
			if _, err := pool.Exec(ctx, d); err != nil {
				return nil, fmt.Errorf("%s: %w", d, err)
			}
		}
		return &variant{name: name, table: t}, nil
	}
	var vs []*variant
	v, err := mk("primary key only (floor)")
	if err != nil {
		return err
	}
	vs = append(vs, v)
	var all []string
	for _, x := range idx {
		def := x.def
		all = append(all, def)
		v, err := mk("+ "+x.name, def)
		if err != nil {
			return err
		}
		vs = append(vs, v)
	}
	if v, err = mk("all indexes of events", all...); err != nil {
		return err
	}
	vs = append(vs, v)

	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return err
	}
	seq := 0
	for round := 0; round < rounds; round++ {
		for _, v := range vs {
			sql := `INSERT INTO ` + v.table + ` (type, tags, data) VALUES ($1, $2::text[], $3::jsonb)`
			var lsn0, lsn1 string
			if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn0); err != nil {
				return err
			}
			cpu0, err := procCPU(pid)
			if err != nil {
				return err
			}
			for i := 0; i < rows; i++ {
				seq++
				tags := []string{"account=0-" + strconv.Itoa(seq%100), "writer=0"}
				data := `{"n":` + strconv.Itoa(seq) + `,"amount":42,"note":"benchmark payload"}`
				if _, err := conn.Exec(ctx, sql, "BenchAppended", tags, data); err != nil {
					return err
				}
			}
			cpu1, err := procCPU(pid)
			if err != nil {
				return err
			}
			if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn1); err != nil {
				return err
			}
			var d float64
			if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)`, lsn1, lsn0).Scan(&d); err != nil {
				return err
			}
			v.wal = append(v.wal, d/float64(rows))
			v.cpu = append(v.cpu, float64((cpu1-cpu0).Microseconds())/float64(rows))
		}
	}
	fmt.Printf("%d rows per variant and round, %d rounds, median (min–max); %s\n\n", rows, rounds, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Println("| table | WAL B per row | server CPU µs per row |")
	fmt.Println("|---|---:|---:|")
	for _, v := range vs {
		fmt.Printf("| %s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) |\n", v.name, med(v.wal), minOf(v.wal), maxOf(v.wal), med(v.cpu), minOf(v.cpu), maxOf(v.cpu))
	}
	return nil
}

// procCPU is the user+system CPU time of process pid (Linux, clock ticks of
// 10 ms).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("the server must run on this machine: %w", err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

func med(x []float64) float64 {
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	if len(y)%2 == 1 {
		return y[len(y)/2]
	}
	return (y[len(y)/2-1] + y[len(y)/2]) / 2
}

func minOf(x []float64) float64 {
	m := x[0]
	for _, v := range x {
		m = min(m, v)
	}
	return m
}

func maxOf(x []float64) float64 {
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	return m
}
