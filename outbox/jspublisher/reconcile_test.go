package jspublisher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
	"github.com/pgdcb/pgdcb/projection"
)

// windowPassed waits until a message published with id at about the time the
// relay's messages were is no longer a duplicate for probe's stream (which
// has the same Duplicates window): proof that the window of the relay's
// messages has passed too.
func windowPassed(t *testing.T, js jetstream.JetStream, subject, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ack, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: subject, Header: nats.Header{jetstream.MsgIDHeader: {id}}})
		require.NoError(t, err)
		return !ack.Duplicate
	}, 30*time.Second, 200*time.Millisecond, "the Duplicates window never passed")
}

// A relay publishes a batch and "crashes" before its checkpoint moves; it is
// restarted after the stream's Duplicates window (1 s) has passed, so
// Nats-Msg-Id no longer protects: reconciliation with the stream's last
// message keeps the batch from reaching the stream twice. Both with a new
// publisher (a restarted process) and with the same one (a relay restarted
// in the same process).
func TestReconcileBeyondDuplicatesWindow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		inflight int
		samePub  bool
	}{{"inflight=1", 1, false}, {"inflight=64", 64, false}, {"same-publisher", 16, true}} {
		t.Run(c.name, func(t *testing.T) {
			window := func(sc *jetstream.StreamConfig) { sc.Duplicates = time.Second }
			js, st, prefix := testStreamWith(t, window)
			_, probePrefix := createTestStream(t, js, window)
			s := newStore(t)
			appendN(t, s, "OrderPlaced", 300, 100)

			pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: c.inflight})
			require.NoError(t, err)
			kp := &killingPublisher{inner: pub, n: fast.BatchSize, reached: make(chan struct{})}
			r1, err := outbox.New(s, ordersTopic, "nats", kp, fast)
			require.NoError(t, err)
			stop := run(t, r1)
			<-kp.reached                                       // the whole first batch is in the stream
			windowPassed(t, js, probePrefix+".probe", "probe") // first publish: stored
			stop()                                             // the checkpoint stays at the start
			stat, err := r1.Status(context.Background())
			require.NoError(t, err)
			require.Zero(t, stat.Cursor.Position, "the checkpoint moved past an unacknowledged batch")
			require.Equal(t, fast.BatchSize, streamMsgs(t, st))
			windowPassed(t, js, probePrefix+".probe", "probe")

			if !c.samePub {
				pub, err = jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: c.inflight})
				require.NoError(t, err)
			}
			r2, err := outbox.New(s, ordersTopic, "nats", pub, fast)
			require.NoError(t, err)
			run(t, r2)
			require.Eventually(t, func() bool {
				stat, err := r2.Status(context.Background())
				require.NoError(t, err)
				return stat.Cursor.Position >= 300
			}, wait, 10*time.Millisecond)
			require.Equal(t, 300, streamMsgs(t, st), "duplicates reached the stream")
			requireExactlyOnceInOrder(t, s, st, "OrderPlaced")
		})
	}
}

// With several messages in flight, JetStream refuses one in the middle of
// a window (too large for the stream) and stores those after it. The
// stream's last message then does not prove that everything before it is
// stored: neither the relay that hit the refusal nor a restarted one (a new
// publisher, after Resume) may skip the refused message.
func TestReconcileNeverSkipsARefusedMessage(t *testing.T) {
	t.Parallel()
	js, st, prefix := testStreamWith(t, func(sc *jetstream.StreamConfig) { sc.MaxMsgSize = 1000 })
	s := newStore(t)
	appendN(t, s, "OrderPlaced", 10, 10)
	big, err := s.Append(context.Background(), []pgdcb.Event{
		pgdcb.MustEvent("OrderPlaced", map[string]string{"blob": strings.Repeat("x", 2000)}, "order=big"),
	})
	require.NoError(t, err)
	appendN(t, s, "OrderPlaced", 10, 10)
	cfg := *fast
	cfg.MaxAttempts = 3
	for _, process := range []string{"first", "restarted"} {
		pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: 64})
		require.NoError(t, err)
		r, err := outbox.New(s, ordersTopic, "nats", pub, &cfg)
		require.NoError(t, err)
		if process == "restarted" {
			require.NoError(t, r.Resume(context.Background()))
		}
		stop := run(t, r)
		var stat outbox.Status
		require.Eventually(t, func() bool {
			stat, err = r.Status(context.Background())
			if errors.Is(err, projection.ErrNotFound) {
				return false // the relay has not started yet
			}
			require.NoError(t, err)
			return stat.State == projection.Failed
		}, wait, 10*time.Millisecond, process)
		stop()
		require.Less(t, stat.Cursor.Position, big.Positions[0], "%s: the checkpoint passed a message the stream refused", process)
		require.Contains(t, stat.LastError, "maximum")
		_, positions := consumeAll(t, st)
		require.NotContains(t, positions, big.Positions[0])
		require.Len(t, positions, 20, "%s: the messages around the refused one were not published once each", process)
		t.Logf("%s: stream holds %d messages, last error: %s", process, len(positions), stat.LastError)
	}
}

// Process A's publisher delivered the first batch and knows it; another
// process (its own publisher) led meanwhile, published the next batch and
// died before its checkpoint moved. When A leads again after the Duplicates
// window, its batch starts past what it knows: only the new leadership term
// tells it to ask the stream, which already holds the batch.
func TestReconcileAfterAnotherLeaderPublished(t *testing.T) {
	t.Parallel()
	window := func(sc *jetstream.StreamConfig) { sc.Duplicates = time.Second }
	js, st, prefix := testStreamWith(t, window)
	_, probePrefix := createTestStream(t, js, window)
	s := newStore(t)
	ctx := context.Background()
	newPub := func() *jspublisher.Publisher {
		pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix})
		require.NoError(t, err)
		return pub
	}
	pubA := newPub()
	appendN(t, s, "OrderPlaced", fast.BatchSize, fast.BatchSize)
	ra, err := outbox.New(s, ordersTopic, "nats", pubA, fast)
	require.NoError(t, err)
	stop := run(t, ra)
	require.Eventually(t, func() bool {
		stat, err := ra.Status(ctx)
		return err == nil && stat.Cursor.Position >= int64(fast.BatchSize)
	}, wait, 10*time.Millisecond)
	stop()
	require.Equal(t, fast.BatchSize, streamMsgs(t, st))

	appendN(t, s, "OrderPlaced", fast.BatchSize, fast.BatchSize)
	kp := &killingPublisher{inner: newPub(), n: fast.BatchSize, reached: make(chan struct{})}
	rb, err := outbox.New(s, ordersTopic, "nats", kp, fast)
	require.NoError(t, err)
	stop = run(t, rb)
	<-kp.reached
	windowPassed(t, js, probePrefix+".probe", "probe")
	stop()
	require.Equal(t, 2*fast.BatchSize, streamMsgs(t, st))
	windowPassed(t, js, probePrefix+".probe", "probe")

	ra2, err := outbox.New(s, ordersTopic, "nats", pubA, fast) // process A leads again
	require.NoError(t, err)
	run(t, ra2)
	require.Eventually(t, func() bool {
		stat, err := ra2.Status(ctx)
		require.NoError(t, err)
		return stat.Cursor.Position >= int64(2*fast.BatchSize)
	}, wait, 10*time.Millisecond)
	require.Equal(t, 2*fast.BatchSize, streamMsgs(t, st), "duplicates reached the stream")
	requireExactlyOnceInOrder(t, s, st, "OrderPlaced")
}
