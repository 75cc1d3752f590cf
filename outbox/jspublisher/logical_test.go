package jspublisher_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// logicalFast is fast in logical decoding mode, retrying for ever: a
// restarted relay may find its slot still held, for a moment, by the WAL
// sender of a killed one.
func logicalFast() *outbox.Config {
	c := *fast
	c.Logical = &logical.Config{}
	c.MaxAttempts = projection.RetryForever
	return &c
}

// holdXID opens a transaction on pool that holds an xid until the test
// ends; still reports whether it still holds that xid.
func holdXID(t *testing.T, pool *pgxpool.Pool) (still func() bool) {
	t.Helper()
	conn, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	var xid uint64
	_, err = conn.Exec(t.Context(), "BEGIN")
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT pg_current_xact_id()`).Scan(&xid))
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "ROLLBACK") })
	return func() bool {
		var got *uint64
		err := conn.QueryRow(t.Context(), `SELECT pg_current_xact_id_if_assigned()`).Scan(&got)
		return err == nil && got != nil && *got == xid
	}
}

// slotSeen is a subscription.StatusTracer that records the readers whose
// replication slot state it was given (what pgdcbprom.New shows
// as pgdcb_reader_slot_retained_wal_bytes).
type slotSeen struct{ names sync.Map }

func (*slotSeen) TraceBatchStart(ctx context.Context, _ subscription.TraceBatchData) context.Context {
	return ctx
}
func (*slotSeen) TraceBatchEnd(context.Context, subscription.TraceBatchData) {}
func (*slotSeen) TraceReaderError(context.Context, string, error)            {}
func (*slotSeen) TraceLag(context.Context, string, subscription.Lag)         {}
func (*slotSeen) TraceLeader(context.Context, string, bool)                  {}
func (*slotSeen) TraceFailed(context.Context, string, bool)                  {}
func (s *slotSeen) TraceSlot(_ context.Context, name string, _ subscription.SlotStatus) {
	s.names.Store(name, true)
}

func (s *slotSeen) seen(name string) bool { _, ok := s.names.Load(name); return ok }

// TestLogicalRelaySIGKILL: a relay in logical decoding mode
// (Config.Logical), with a transaction of the same database holding an xid
// for the whole test (the default tail read delivers nothing past it while
// it is open). Its process is killed with SIGKILL in the middle of a batch
// (at varied points; the batches split the appended transactions); a
// restarted relay resumes from the stored checkpoint, and the stream holds
// every event exactly once in COMMIT order (the event of a transaction that
// began first and committed last comes last), while the holder is provably
// still open. The relay's slot retention is in its metrics.
func TestLogicalRelaySIGKILL(t *testing.T) {
	for round := range 2 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s, pool := teststore.Logical(t, nil)
			js, st, prefix := testStream(t)
			ctx := t.Context()
			name := outbox.CheckpointName(ordersTopic.Name, "nats")
			// Registered first, so it runs after the relays stopped.
			t.Cleanup(func() {
				await.Within(wait, func() (bool, string) {
					return logical.DropSlot(context.Background(), pool, logical.SlotName(s.Schema(), name)) == nil, ""
				})
			})
			newRelay := func(cfg *outbox.Config) *outbox.Relay {
				pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: 8})
				require.NoError(t, err)
				r, err := outbox.New(s, ordersTopic, "nats", pub, cfg)
				require.NoError(t, err)
				return r
			}

			// The slot exists before the holder opens (creating it waits
			// for the running transactions).
			stop := run(t, newRelay(logicalFast()))
			appendN(t, s, "OrderPlaced", 1, 1)
			require.Eventually(t, func() bool { return streamMsgs(t, st) == 1 }, wait, 10*time.Millisecond)
			// And its logical checkpoint is stored: a relay stopped before
			// (published, batch not committed) leaves none, and the next
			// one creates the slot anew, which waits for the holder below.
			require.Eventually(t, func() bool {
				var stored bool
				err := pool.QueryRow(ctx, `SELECT coalesce(logical_checkpoint, '') <> '' FROM `+
					pgx.Identifier{s.Schema()}.Sanitize()+`.checkpoints WHERE name = $1`, name).Scan(&stored)
				return err == nil && stored
			}, wait, 10*time.Millisecond)
			stop()

			still := holdXID(t, pool)
			early, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer early.Rollback(context.Background())
			first, err := s.AppendTx(ctx, early, []pgdcb.Event{pgdcb.MustEvent("OrderPlaced", map[string]int{"i": -1}, "order=early")})
			require.NoError(t, err)
			appendN(t, s, "OrderPlaced", 600, 100)
			require.NoError(t, early.Commit(ctx))
			// Commit order: the early transaction's event (the lowest
			// transaction id and position of the 601) comes last.
			evs, _, err := s.ReadAll(ctx, query.Tagged([]string{"OrderPlaced"}), nil)
			require.NoError(t, err)
			var want []int64
			for _, ev := range evs {
				if ev.Position != first.Positions[0] {
					want = append(want, ev.Position)
				}
			}
			want = append(want, first.Positions[0])
			require.Len(t, want, 602)

			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRelay$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperSchemaEnv+"="+s.Schema(), helperSubjectEnv+"="+prefix,
				helperDSNEnv+"="+pgtest.LogicalCluster(t).DSN(), helperLogicalEnv+"=1")
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			halves := make(chan struct{}, 1)
			go func() {
				sc := bufio.NewScanner(out)
				for n := 0; sc.Scan(); {
					if sc.Text() == "HALF" {
						if n++; n == 2+round {
							halves <- struct{}{}
						}
					}
				}
			}()
			select {
			case <-halves:
			case <-time.After(wait):
				t.Fatal("the relay published nothing while the holder was open")
			}
			time.Sleep(time.Duration(round*9) * time.Millisecond)
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			require.Less(t, streamMsgs(t, st), 602)

			slots := &slotSeen{}
			cfg := logicalFast()
			cfg.Tracer = slots
			r := newRelay(cfg)
			run(t, r)
			require.Eventually(t, func() bool { return streamMsgs(t, st) >= 602 }, wait, 10*time.Millisecond)
			require.True(t, still(), "the holder ended before the delivery")
			ids, positions := consumeAll(t, st)
			require.Equal(t, want, positions, "exactly once, in commit order")
			for i, p := range positions {
				require.Equal(t, fmt.Sprintf("%s-%d", s.Schema(), p), ids[i])
			}
			require.Eventually(t, func() bool { return slots.seen(r.Name()) }, wait, 20*time.Millisecond,
				"the relay's replication slot state (pgdcb_reader_slot_retained_wal_bytes)")
		})
	}
}
