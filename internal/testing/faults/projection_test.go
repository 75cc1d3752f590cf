package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// The projection of scenario 3: one read-model row per event of type P, in
// a table without unique constraint, so that a duplicate would show.
var projQ = query.Tagged([]string{"P"})

const projBatch = 100

func projConfig() *projection.Config {
	return &projection.Config{
		BatchSize: projBatch,
		ReaderConfig: projection.ReaderConfig{
			PollInterval:      50 * time.Millisecond,
			ElectionInterval:  50 * time.Millisecond,
			HeartbeatInterval: time.Second,
			RetryMin:          20 * time.Millisecond,
			RetryMax:          200 * time.Millisecond,
		},
	}
}

func insertRows(quoted string) projection.Handler {
	return func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		pos := make([]int64, len(evs))
		for i, ev := range evs {
			pos[i] = ev.Position
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+quoted+`.rm (position) SELECT unnest($1::bigint[])`, pos)
		return err
	}
}

// TestHelperProjection is the child process of TestProjectionSIGKILL: it
// runs the projection and prints BATCH each time a batch's rows are written
// but not committed, then lingers 30 ms there so that the parent can kill it.
func TestHelperProjection(t *testing.T) {
	if os.Getenv(childEnv) != "projection" {
		t.Skip("child process of TestProjectionSIGKILL")
	}
	pool, err := pgxpool.New(context.Background(), os.Getenv(dsnEnv))
	require.NoError(t, err)
	schema := os.Getenv(schemaEnv)
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	ins := insertRows(pgx.Identifier{schema}.Sanitize())
	r, err := projection.New(store, "rm", projQ, func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		if err := ins(ctx, tx, evs); err != nil {
			return err
		}
		fmt.Println("BATCH")
		time.Sleep(30 * time.Millisecond)
		return nil
	}, projConfig())
	require.NoError(t, err)
	_ = r.Run(context.Background()) // until killed
}

// Scenario 3. A projection runs in a child process, which is SIGKILLed in
// the middle of a batch (rows written, not committed) or a little later, in
// three rounds with events appended between them; then the projection runs
// here to the end. The read model holds every event exactly once, and what
// the killed children committed was always whole batches.
func TestProjectionSIGKILL(t *testing.T) {
	s := cluster(t)
	began := time.Now()
	e := newEnv(t)
	store := e.store(t, newPool(t, "faults_proj", 4, nil), nil)
	_, err := e.admin.Exec(t.Context(), `CREATE TABLE `+e.quoted+`.rm (position bigint NOT NULL)`)
	require.NoError(t, err)
	appendP := func(n int) {
		for ; n > 0; n -= projBatch {
			_, err := store.Append(t.Context(), batch("P", fmt.Sprint("p-", time.Now().UnixNano()), projBatch))
			require.NoError(t, err)
		}
	}
	rmCount := func() int {
		var n int
		require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM `+e.quoted+`.rm`).Scan(&n))
		return n
	}

	total, partial := 0, 0
	var counts []int
	for round := range 3 {
		appendP(500)
		total += 500
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProjection$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=projection", dsnEnv+"="+s.DSN(), schemaEnv+"="+e.schema)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		for n := 0; n < 2+round && sc.Scan(); {
			if sc.Text() == "BATCH" {
				n++
			}
		}
		// Inside a batch: rows written, not committed. Kill it there, or a
		// little later (while it commits or starts the next batch).
		time.Sleep(time.Duration(round*13) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		n := rmCount()
		counts = append(counts, n)
		if n%projBatch != 0 {
			partial++
		}
	}
	require.Less(t, counts[len(counts)-1], total, "the children were killed before the end")

	restart := time.Now()
	r, err := projection.New(store, "rm", projQ, insertRows(e.quoted), projConfig())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	require.Eventually(t, func() bool { return rmCount() >= total }, waitTimeout, 10*time.Millisecond, "the projection catches up")
	recovery := time.Since(restart)
	// Nothing more may come once the checkpoint covers the log's last P
	// event: rows and checkpoint commit together, so the read model is then
	// final (waited for as observable state, not slept for).
	logged, _, err := store.ReadAll(t.Context(), projQ, nil)
	require.NoError(t, err)
	last := logged[len(logged)-1]
	waitUntil(t, "the projection's checkpoint covers the last event", func() bool {
		st, err := r.Status(t.Context())
		require.NoError(t, err)
		return cursor.Compare(st.Cursor.TransactionID, st.Cursor.Position, last.TransactionID, last.Position) >= 0
	})

	var rows, distinct, missing, extra int
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT position) FROM `+e.quoted+`.rm`).Scan(&rows, &distinct))
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM `+e.quoted+`.events e WHERE type = 'P'
		AND NOT EXISTS (SELECT 1 FROM `+e.quoted+`.rm r WHERE r.position = e.position)`).Scan(&missing))
	require.NoError(t, e.admin.QueryRow(t.Context(), `SELECT count(*) FROM `+e.quoted+`.rm r
		WHERE NOT EXISTS (SELECT 1 FROM `+e.quoted+`.events e WHERE e.position = r.position AND e.type = 'P')`).Scan(&extra))
	f := figures{Scenario: "3 projection SIGKILL", Attempts: 3, Acked: total, Lost: missing,
		Duplicated: rows - distinct, Partial: partial, Recovery: recovery, Elapsed: time.Since(began),
		Note: fmt.Sprintf("3 children killed; rows committed when each died: %v; %d events projected on restart", counts, total-counts[len(counts)-1])}
	record(t, f)
	require.Zero(t, partial, "a killed child committed part of a batch: rows %v", counts)
	require.Zero(t, missing, "events missing from the read model")
	require.Zero(t, rows-distinct, "events projected twice")
	require.Zero(t, extra, "rows of no event")
	require.Equal(t, total, rows)
}
