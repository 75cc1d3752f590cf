package projection_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

var fast = &projection.Config{
	ReaderConfig: projection.ReaderConfig{
		PollInterval:      20 * time.Millisecond,
		ElectionInterval:  50 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond,
		RetryMin:          time.Millisecond,
		RetryMax:          10 * time.Millisecond,
	},
}

func start(t *testing.T, r *projection.Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		})
	}
	t.Cleanup(stop)
	return stop
}

// 8 concurrent writers append 20,000 events while two runners of the
// projection compete; the read model ends with exactly one row per event.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	q := query.Tagged([]string{"P"})
	for i := range 2 {
		cfg := *fast
		cfg.Identity = fmt.Sprint("runner-", i)
		r, err := projection.New(s, "rm", q, insertRows(ident.Schema(s)), &cfg)
		require.NoError(t, err)
		start(t, r)
	}
	const writers, total = 8, 20000
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			appendN(t, s, "P", total/writers, 100)
		})
	}
	appendN(t, s, "Other", 500, 100)
	wg.Wait()
	require.Eventually(t, func() bool { return rmCount(t, pool, s) >= total }, wait, 10*time.Millisecond)
	requireExactlyOnce(t, pool, s, total)
	st, err := projection.GetStatus(context.Background(), s, "rm")
	require.NoError(t, err)
	require.Equal(t, projection.Active, st.State)
	require.Zero(t, st.ErrorCount)
}

// wait bounds every Eventually: an open transaction anywhere in the cluster
// (other test packages share the server) holds the horizon back and delays
// tailing readers for as long as it stays open.
const wait = 90 * time.Second

const helperEnv = "PGDCB_PROJECTION_HELPER_SCHEMA"

// TestHelperProcess is the child process of TestCrashMidBatch: it runs the
// projection and prints BATCH each time a batch's rows are written but not yet
// committed, then lingers so the parent can kill it there.
func TestHelperProcess(t *testing.T) {
	schema := os.Getenv(helperEnv)
	if schema == "" {
		t.Skip("child process of TestCrashMidBatch")
	}
	pool := newPool(t, pgtest.DSN(t))
	s := storeOn(t, pool, schema)
	ins := insertRows(ident.Schema(s))
	cfg := *fast
	cfg.BatchSize = 100
	r, err := projection.New(s, "rm", query.Tagged([]string{"P"}), func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		if err := ins(ctx, tx, evs); err != nil {
			return err
		}
		fmt.Println("BATCH")
		time.Sleep(30 * time.Millisecond)
		return nil
	}, &cfg)
	require.NoError(t, err)
	_ = r.Run(context.Background()) // until killed
}

// The projection's process is killed with SIGKILL during a batch; after a
// restart the read model has every event exactly once. Not parallel: the
// child's batches (and the transaction it dies in) hold back every tailing
// reader.
func TestCrashMidBatch(t *testing.T) {
	for round := range 6 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s, pool := newStore(t)
			const total = 2000
			appendN(t, s, "P", total, 500)

			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+s.Schema())
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			sc := bufio.NewScanner(out)
			batches := 0
			for sc.Scan() && batches < 3+round {
				if sc.Text() == "BATCH" {
					batches++
				}
			}
			// The child is inside a batch: rows written, not committed. Kill
			// it there, or a little later (while it commits, moves the
			// checkpoint or starts the next batch).
			time.Sleep(time.Duration(round*7) * time.Millisecond)
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			done := rmCount(t, pool, s)
			require.Less(t, done, total)
			require.Zero(t, done%100, "a partial batch was committed")

			r, err := projection.New(s, "rm", query.Tagged([]string{"P"}), insertRows(ident.Schema(s)), fast)
			require.NoError(t, err)
			start(t, r)
			require.Eventually(t, func() bool { return rmCount(t, pool, s) >= total }, wait, 10*time.Millisecond)
			requireExactlyOnce(t, pool, s, total)
		})
	}
}

// leaderPID is the backend holding the projection's leader lock (0: none).
func leaderPID(t *testing.T, s *eventstore.Store, name string) int {
	k1, k2 := projection.LockKey(s.Schema(), name)
	var pid int
	err := s.Pool().QueryRow(context.Background(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND objsubid = 2 AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		int64(uint32(k1)), int64(uint32(k2))).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return pid
}

// Two runners; the leader's backend is terminated (twice); the other takes
// over and nothing is lost or doubled.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	q := query.Tagged([]string{"P"})
	var runners [2]*projection.Runner
	for i := range runners {
		cfg := *fast
		cfg.Identity = fmt.Sprint("runner-", i)
		cfg.BatchSize = 50
		r, err := projection.New(storeOn(t, newPool(t, pgtest.DSN(t)), s.Schema()), "rm", q, insertRows(ident.Schema(s)), &cfg)
		require.NoError(t, err)
		runners[i] = r
		start(t, r)
	}
	leader := func() int {
		for i, r := range runners {
			if r.IsLeader() {
				return i
			}
		}
		return -1
	}
	var writing sync.WaitGroup
	var stopWriting atomic.Bool
	var written atomic.Int64
	writing.Go(func() {
		for !stopWriting.Load() {
			appendN(t, s, "P", 20, 20)
			written.Add(20)
			time.Sleep(2 * time.Millisecond)
		}
	})
	for range 2 {
		require.Eventually(t, func() bool { return leader() >= 0 && leaderPID(t, s, "rm") != 0 }, wait, 5*time.Millisecond)
		old := leader()
		before := rmCount(t, pool, s)
		var ok bool
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, leaderPID(t, s, "rm")).Scan(&ok))
		require.True(t, ok)
		require.Eventually(t, func() bool { return leader() == 1-old }, wait, 5*time.Millisecond, "the standby did not take over")
		require.Eventually(t, func() bool { return rmCount(t, pool, s) > before+100 }, wait, 5*time.Millisecond, "the new leader does not make progress")
	}
	stopWriting.Store(true)
	writing.Wait()
	total := int(written.Load())
	require.Eventually(t, func() bool { return rmCount(t, pool, s) >= total }, wait, 10*time.Millisecond)
	requireExactlyOnce(t, pool, s, total)
}

// A failing handler is retried with backoff, becomes FAILED after
// MaxAttempts with its error visible, and continues from the same checkpoint
// after Resume. Pause stops processing; Reset rebuilds from zero.
func TestStatusPauseResumeReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	var failing atomic.Bool
	failing.Store(true)
	var calls atomic.Int64
	ins := insertRows(ident.Schema(s))
	cfg := *fast
	cfg.MaxAttempts = 3
	cfg.Reset = func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM `+ident.Schema(s)+`.rm`)
		return err
	}
	r, err := projection.New(s, "rm", query.Tagged([]string{"P"}), func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		calls.Add(1)
		if err := ins(ctx, tx, evs); err != nil {
			return err
		}
		if failing.Load() {
			return errors.New("read model unavailable")
		}
		return nil
	}, &cfg)
	require.NoError(t, err)
	_, err = r.Status(ctx)
	require.ErrorIs(t, err, projection.ErrNotFound)

	appendN(t, s, "P", 30, 30)
	start(t, r)
	require.Eventually(t, func() bool {
		st, err := r.Status(ctx)
		return err == nil && st.State == projection.Failed
	}, wait, 5*time.Millisecond)
	st, err := r.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, st.ErrorCount)
	require.Contains(t, st.LastError, "read model unavailable")
	// The checkpoint may have moved up to the horizon, never past an event.
	evs, _, err := s.ReadAll(ctx, query.Tagged([]string{"P"}), nil)
	require.NoError(t, err)
	require.Less(t, st.Cursor.TransactionID, evs[0].TransactionID)
	require.Equal(t, int64(3), calls.Load())
	require.Zero(t, rmCount(t, pool, s), "a failed batch committed")

	failing.Store(false)
	require.NoError(t, r.Resume(ctx))
	require.Eventually(t, func() bool { return rmCount(t, pool, s) == 30 }, wait, 5*time.Millisecond)
	st, err = r.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, projection.Active, st.State)
	require.Zero(t, st.ErrorCount)

	require.NoError(t, r.Pause(ctx))
	st, err = r.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, projection.Paused, st.State)
	appendN(t, s, "P", 10, 10)
	// A batch that read ACTIVE before Pause may still call the handler (at
	// any time, under load), but it must not commit: nothing moves while
	// paused. The leader writes heartbeat_at after a poll (every poll here,
	// as each takes longer than HeartbeatInterval apart): three new
	// heartbeats mean at least two whole polls after the append, counted
	// rather than slept for, so a loaded machine cannot make the check
	// vacuous.
	hb := st.HeartbeatAt
	for beats := 0; beats < 3; beats++ {
		await.Until(t, wait, func() (bool, string) {
			now, err := r.Status(ctx)
			require.NoError(t, err)
			require.Equal(t, 30, rmCount(t, pool, s), "a paused projection committed a batch")
			require.Equal(t, projection.Paused, now.State)
			require.Equal(t, st.Cursor, now.Cursor, "a paused projection moved its checkpoint")
			if now.HeartbeatAt.After(hb) {
				hb = now.HeartbeatAt
				return true, ""
			}
			return false, fmt.Sprintf("the paused leader's heartbeat still at %s", hb)
		})
	}
	require.NoError(t, r.Resume(ctx))
	require.Eventually(t, func() bool { return rmCount(t, pool, s) == 40 }, wait, 5*time.Millisecond)

	require.NoError(t, r.Reset(ctx))
	require.Eventually(t, func() bool {
		st, _ := r.Status(ctx)
		return st.Cursor.Position > 0 && rmCount(t, pool, s) == 40
	}, wait, 5*time.Millisecond)
	requireExactlyOnce(t, pool, s, 40)
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	h := insertRows(ident.Schema(s))
	_, err := projection.New(s, "", query.All(), h, nil)
	require.ErrorIs(t, err, projection.ErrInvalidName)
	_, err = projection.New(s, "a\x00b", query.All(), h, nil)
	require.ErrorIs(t, err, projection.ErrInvalidName)
	_, err = projection.New(s, "x", query.Query{}, h, nil)
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	_, err = projection.New(s, "x", query.All(), nil, nil)
	require.Error(t, err)
}

// A handler error whose message PostgreSQL text cannot hold as is (long
// multi-byte text cut anywhere, invalid UTF-8, NUL) is still recorded, so the
// projection becomes FAILED at MaxAttempts.
func TestUnstorableErrorMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	cfg := *fast
	cfg.MaxAttempts = 2
	msg := "x" + strings.Repeat("é", 1500) + "\x00\xff"
	r, err := projection.New(s, "rm", query.Tagged([]string{"P"}), func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error {
		return errors.New(msg)
	}, &cfg)
	require.NoError(t, err)
	appendN(t, s, "P", 1, 1)
	start(t, r)
	require.Eventually(t, func() bool {
		st, err := r.Status(ctx)
		return err == nil && st.State == projection.Failed
	}, wait, 5*time.Millisecond)
	st, err := r.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.ErrorCount)
	require.True(t, utf8.ValidString(st.LastError))
	require.LessOrEqual(t, len(st.LastError), 2000)
	require.Contains(t, st.LastError, "xéé")
}
