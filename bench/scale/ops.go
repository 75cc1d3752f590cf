package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/projection"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// OpRow is one step of a user's life run on the live log while 8 writers
// append: how long it took and the longest Append that overlapped it (the
// pause a writer saw). The bar is MaxAppendMs ≤ 1000 at 10^8.
type OpRow struct {
	Op          string  `json:"op"`
	Seconds     float64 `json:"seconds"`
	Appends     int64   `json:"appends"`
	P50Ms       float64 `json:"append_p50_ms"`
	MaxAppendMs float64 `json:"max_append_ms"`
	Error       string  `json:"error,omitempty"`
}

// ops runs, one after another while 8 writers append one event per call:
// Migrate (at head: what a deploy runs every time), Grant to a fresh role,
// a new index on events (CREATE INDEX CONCURRENTLY, then DROP INDEX
// CONCURRENTLY), and a projection Reset. Each row records the Appends that
// completed during the step and the longest of them.
func (m *meter) ops(ctx context.Context, r *SizeResult) error {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	role := "pgdcb_scale_role_" + hex.EncodeToString(b[:])
	if _, err := m.pool.Exec(ctx, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` NOLOGIN`); err != nil {
		return err
	}
	defer m.pool.Exec(context.WithoutCancel(ctx), `DROP OWNED BY `+pgx.Identifier{role}.Sanitize()+`; DROP ROLE `+pgx.Identifier{role}.Sanitize()) //nolint:errcheck
	ix := pgx.Identifier{m.schema, "scale_new_index"}.Sanitize()
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"migrate", func(ctx context.Context) error { _, err := pgdcbsql.Migrate(ctx, m.pool, m.schema); return err }},
		{"grant", func(ctx context.Context) error { return pgdcbsql.Grant(ctx, m.pool, m.schema, role) }},
		{"create index concurrently", func(ctx context.Context) error {
			_, err := m.pool.Exec(ctx, `CREATE INDEX CONCURRENTLY scale_new_index ON `+pgx.Identifier{m.schema, "events"}.Sanitize()+` (occurred_at)`)
			return err
		}},
		{"drop index concurrently", func(ctx context.Context) error {
			_, err := m.pool.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+ix)
			return err
		}},
		{"projection reset", func(ctx context.Context) error {
			return projection.Reset(ctx, m.store, "scale-reset", nil)
		}},
	}
	for _, s := range steps {
		row, err := m.underLoad(ctx, s.name, s.fn)
		if err != nil {
			return err
		}
		r.Ops = append(r.Ops, row)
		m.logf("size %s: %s took %.1fs; %d appends beside it, the longest %.0f ms", sizeName(m.events), s.name, row.Seconds, row.Appends, row.MaxAppendMs)
	}
	return nil
}

// underLoad runs fn while 8 writers append; a step that fails is recorded,
// not fatal (the row says why), but an Append that fails is.
func (m *meter) underLoad(ctx context.Context, name string, fn func(context.Context) error) (OpRow, error) {
	row := OpRow{Op: name}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lats    []time.Duration
		failed  error
		seq     atomic.Int64
		stepRun atomic.Bool // set while fn runs: only those appends count
		stop    atomic.Bool
	)
	started := make(chan struct{}, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			// Writers stop between calls, never by cancelling one: a
			// cancelled Append settles its outcome, which would count as a
			// pause the step did not cause.
			for !stop.Load() && ctx.Err() == nil {
				counting := stepRun.Load()
				t0 := time.Now()
				_, err := m.store.Append(ctx, []pgdcb.Event{benchEvent(m.spec.Stage, 100+w, seq.Add(1))})
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						failed = err
						mu.Unlock()
						cancel()
					}
					return
				}
				if first {
					first = false
					started <- struct{}{}
				}
				// An Append counts when it overlapped the step: it started
				// during it or was still running when it started.
				if counting || stepRun.Load() {
					mu.Lock()
					lats = append(lats, time.Since(t0))
					mu.Unlock()
				}
			}
		}()
	}
	for range 8 {
		select {
		case <-started:
		case <-ctx.Done():
		}
	}
	stepRun.Store(true)
	t0 := time.Now()
	if err := fn(ctx); err != nil && ctx.Err() == nil {
		row.Error = err.Error()
	}
	row.Seconds = time.Since(t0).Seconds()
	stepRun.Store(false)
	stop.Store(true)
	wg.Wait()
	if failed != nil {
		return row, fmt.Errorf("%s: an Append beside it failed: %w", name, failed)
	}
	row.Appends = int64(len(lats))
	row.P50Ms = pct(lats, 50)
	row.MaxAppendMs = pct(lats, 100)
	return row, nil
}

// baseBackup streams a base backup of the server (what a new standby
// copies; pg_basebackup as tar to a pipe, read and thrown away) and returns
// its seconds and bytes: the time to create a standby, less writing it.
func (m *meter) baseBackup(ctx context.Context, r *SizeResult) error {
	cmd := exec.CommandContext(ctx, "pg_basebackup", "-d", m.o.dsn, "-D", "-", "-Ft", "-X", "none", "-c", "fast")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	n, cerr := io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if cerr != nil || werr != nil {
		return fmt.Errorf("pg_basebackup: %v %v: %s", cerr, werr, stderr.String())
	}
	r.BaseBackupSeconds = time.Since(t0).Seconds()
	r.BaseBackupBytes = n
	return nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
