package jspublisher_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
	"github.com/pgdcb/pgdcb/projection"
)

// recoveryBound is the most the relay may take to publish again after the
// broker is back: a liveness bound, generous on a loaded machine; the issue
// it guards against is a 30 s stall (the whole PublishTimeout), and the
// bound is half of that (it was 5 s): a stall still fails it, while a
// loaded, shared machine is far from it.
const recoveryBound = 15 * time.Second

// appendWhile appends events of type typ in small transactions until stop is
// closed, and returns a wait that reports how many it appended.
// awaitAppended waits until n more events are in s's log: time passes for a
// count of the writer's work, not for a sleep.
func awaitAppended(t *testing.T, s *eventstore.Store, n int) {
	t.Helper()
	count := func() int {
		var k int
		require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{s.Schema(), "events"}.Sanitize()).Scan(&k))
		return k
	}
	want := count() + n
	await.Until(t, wait, func() (bool, string) {
		k := count()
		return k >= want, fmt.Sprintf("%d of %d events appended", k, want)
	})
}

func appendWhile(t *testing.T, s *eventstore.Store, typ string, stop <-chan struct{}) (wait func() int) {
	var (
		wg sync.WaitGroup
		n  int
	)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			evs := make([]pgdcb.Event, 10)
			for i := range evs {
				evs[i] = pgdcb.MustEvent(typ, map[string]int{"i": n + i}, "order=o1")
			}
			if _, err := s.Append(context.Background(), evs); err != nil {
				t.Errorf("append: %v", err)
				return
			}
			n += len(evs)
		}
	})
	return func() int { wg.Wait(); return n }
}

// The broker is killed with SIGKILL while the relay publishes, and started
// again on the same port and store directory: the relay publishes again
// within recoveryBound of the broker's return whatever MaxInFlight (not after
// its 30 s PublishTimeout), its status and metrics say it is stalled during
// the outage and not after, and every event reaches the stream exactly once,
// in log order.
func TestBrokerCrashRecovery(t *testing.T) {
	for _, inflight := range []int{1, 64} {
		t.Run(fmt.Sprint("inflight=", inflight), func(t *testing.T) {
			srv := startNATS(t)
			nc, err := nats.Connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.ReconnectBufSize(-1))
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			st, prefix := createTestStream(t, js, func(c *jetstream.StreamConfig) { c.Storage = jetstream.FileStorage })

			s := newStore(t)
			pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: inflight})
			require.NoError(t, err)
			cfg := *fast
			cfg.StallAfter = 300 * time.Millisecond
			cfg.MaxAttempts = projection.RetryForever
			r, err := outbox.New(s, ordersTopic, "nats", pub, &cfg)
			require.NoError(t, err)
			ctx := context.Background()
			status := func() outbox.Status {
				stat, err := r.Status(ctx)
				require.NoError(t, err)
				return stat
			}

			stopAppending := make(chan struct{})
			appended := appendWhile(t, s, "OrderPlaced", stopAppending)
			defer func() {
				select {
				case <-stopAppending:
				default:
					close(stopAppending)
				}
			}()
			run(t, r)
			require.Eventually(t, func() bool { return streamMsgs(t, st) >= 200 }, wait, 5*time.Millisecond)
			require.False(t, status().Stalled)
			require.False(t, status().LastAckAt.IsZero())

			srv.kill() // while the writer appends and the relay publishes
			killedAt := time.Now()
			require.Eventually(t, func() bool { return status().Stalled }, wait, 5*time.Millisecond,
				"the relay never reported the outage as stalled")
			stalledAfter := time.Since(killedAt)
			stat := status()
			require.False(t, stat.InFlightSince.IsZero())
			// What pgdcbprom.New's gauges show (pgdcb_outbox_stalled,
			// _in_flight_seconds, _last_ack_timestamp_seconds).
			d := r.DeliveryState()
			require.True(t, d.Stalled)
			require.Greater(t, time.Since(d.InFlightSince), 300*time.Millisecond)
			require.Equal(t, stat.LastAckAt, d.LastAckAt)
			awaitAppended(t, s, 100) // the outage goes on while the writer appends

			srv.start()
			backAt := time.Now()
			require.Eventually(t, func() bool { return status().LastAckAt.After(backAt) }, recoveryBound, time.Millisecond,
				"the relay did not publish again within %v of the broker's return", recoveryBound)
			recovered := time.Since(backAt)
			require.Eventually(t, func() bool { return !status().Stalled }, recoveryBound, time.Millisecond)
			t.Logf("MaxInFlight %d: stalled reported %v after the kill; first whole batch acknowledged %v after the broker was back",
				inflight, stalledAfter.Round(time.Millisecond), recovered.Round(time.Millisecond))

			awaitAppended(t, s, 50) // more events after the restart
			close(stopAppending)
			n := appended()
			require.Eventually(t, func() bool { return streamMsgs(t, st) >= n }, wait, 10*time.Millisecond)
			requireExactlyOnceInOrder(t, s, st, "OrderPlaced")
			require.False(t, r.DeliveryState().Stalled)
		})
	}
}
