package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// describe names the machine and server in one line and returns the
// server's data directory and the disk reserve: twice max_wal_size plus
// 1 GiB.
func describe(ctx context.Context, pool *pgxpool.Pool) (machine, dataDir string, reserve int64, err error) {
	var version, sharedBuffers string
	var walMB int64
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('shared_buffers'),
		       current_setting('data_directory'),
		       (SELECT setting::bigint * CASE unit WHEN 'MB' THEN 1 WHEN 'GB' THEN 1024 ELSE 1 END FROM pg_settings WHERE name = 'max_wal_size')`).
		Scan(&version, &sharedBuffers, &dataDir, &walMB); err != nil {
		return "", "", 0, fmt.Errorf("reading the server's settings (data_directory needs a superuser or pg_read_all_settings): %w", err)
	}
	mem := ""
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		for _, line := range strings.Split(string(raw), "\n") {
			if _, err := fmt.Sscanf(line, "MemTotal: %f kB", &kb); err == nil {
				mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
			}
		}
	}
	machine = fmt.Sprintf("%d CPUs%s, PostgreSQL %s, shared_buffers %s", runtime.NumCPU(), mem, version, sharedBuffers)
	return machine, dataDir, 2*walMB<<20 + 1<<30, nil
}

var bgwriterColumns = []string{"checkpoints_timed", "checkpoints_req", "checkpoint_write_time", "checkpoint_sync_time",
	"buffers_checkpoint", "buffers_clean", "maxwritten_clean", "buffers_backend", "buffers_backend_fsync", "buffers_alloc"}

// bgwriter reads pg_stat_bgwriter (times in ms, rounded).
func bgwriter(ctx context.Context, pool *pgxpool.Pool) (map[string]int64, error) {
	vals := make([]int64, len(bgwriterColumns))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := pool.QueryRow(ctx, `SELECT `+strings.Join(bgwriterColumns, "::bigint, ")+`::bigint FROM pg_stat_bgwriter`).Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("reading pg_stat_bgwriter: %w", err)
	}
	out := map[string]int64{}
	for i, c := range bgwriterColumns {
		out[c] = vals[i]
	}
	return out, nil
}

// bgwriterSince is the change of pg_stat_bgwriter since before.
func bgwriterSince(ctx context.Context, pool *pgxpool.Pool, before map[string]int64) (map[string]int64, error) {
	now, err := bgwriter(ctx, pool)
	if err != nil {
		return nil, err
	}
	for k, v := range before {
		now[k] -= v
	}
	return now, nil
}

// tableStats is pg_stat_user_tables' row of events.
func tableStats(ctx context.Context, pool *pgxpool.Pool, schema string) (map[string]any, error) {
	var m map[string]any
	err := pool.QueryRow(ctx, `SELECT row_to_json(t) FROM (SELECT n_live_tup, n_dead_tup, n_ins_since_vacuum, seq_scan, idx_scan,
		       vacuum_count, autovacuum_count, analyze_count, autoanalyze_count, last_autovacuum, last_autoanalyze
		  FROM pg_stat_user_tables WHERE relid = $1::regclass) t`, pgx.Identifier{schema, "events"}.Sanitize()).Scan(&m)
	if err != nil {
		return nil, fmt.Errorf("reading pg_stat_user_tables: %w", err)
	}
	return m, nil
}

// buildTail builds the pgdcb command of this checkout into a temporary
// directory.
func buildTail(ctx context.Context) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "pgdcb-scale-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "pgdcb")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/pgdcb/pgdcb/cmd/pgdcb")
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build ./cmd/pgdcb: %v: %s", err, out)
	}
	return bin, cleanup, nil
}

// loadAvg is the machine's 1-minute load average (0 when unreadable).
func loadAvg() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
