package jspublisher_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// wait bounds every Eventually (an open transaction elsewhere in the cluster
// holds the horizon back while it stays open).
const wait = 90 * time.Second

const natsURL = "nats://127.0.0.1:4222"

// newStore returns a store in a fresh schema, dropped when the test ends.
func newStore(t testing.TB) *eventstore.Store {
	t.Helper()
	return pgdcbtest.NewStore(t, &pgdcbtest.Options{OwnPool: true})
}

func randHex(t testing.TB) string {
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// testStream creates a stream of its own (unique name and subjects), deleted
// when the test ends. It returns the JetStream handle, the stream and the
// subject prefix.
func testStream(t testing.TB) (jetstream.JetStream, jetstream.Stream, string) {
	t.Helper()
	return testStreamWith(t, nil)
}

// testStreamWith is testStream on the shared broker with the stream's
// configuration changed by edit (nil: none).
func testStreamWith(t testing.TB, edit func(*jetstream.StreamConfig)) (jetstream.JetStream, jetstream.Stream, string) {
	t.Helper()
	// No reconnect buffer: the connection MaxInFlight > 1 needs.
	nc, err := nats.Connect(natsURL, nats.ReconnectBufSize(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, prefix := createTestStream(t, js, edit)
	return js, st, prefix
}

// createTestStream creates, on js, a stream of its own (unique name and
// subjects), deleted when the test ends, and returns it with its subject
// prefix.
func createTestStream(t testing.TB, js jetstream.JetStream, edit func(*jetstream.StreamConfig)) (jetstream.Stream, string) {
	t.Helper()
	id := randHex(t)
	prefix := "pgdcbtest_" + id
	cfg := jetstream.StreamConfig{
		Name: "PGDCB_TEST_" + id, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage,
		Duplicates: 5 * time.Minute,
	}
	if edit != nil {
		edit(&cfg)
	}
	st, err := js.CreateStream(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Name) })
	return st, prefix
}

func appendN(t testing.TB, s *eventstore.Store, typ string, n, per int) {
	t.Helper()
	for n > 0 {
		k := min(n, per)
		evs := make([]pgdcb.Event, k)
		for i := range evs {
			evs[i] = pgdcb.MustEvent(typ, map[string]int{"i": i}, "order=o"+strconv.Itoa(i%3))
		}
		_, err := s.Append(context.Background(), evs)
		require.NoError(t, err)
		n -= k
	}
}

// consumeAll reads the whole stream with an ordered consumer and returns the
// Nats-Msg-Id and Pgdcb-Position of each message, in stream order.
func consumeAll(t testing.TB, st jetstream.Stream) (ids []string, positions []int64) {
	t.Helper()
	ctx := context.Background()
	info, err := st.Info(ctx)
	require.NoError(t, err)
	n := int(info.State.Msgs)
	if n == 0 {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	for len(ids) < n {
		batch, err := cons.Fetch(n-len(ids), jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			p, err := strconv.ParseInt(m.Headers().Get(jspublisher.HeaderPosition), 10, 64)
			require.NoError(t, err)
			positions = append(positions, p)
		}
		require.NoError(t, batch.Error())
	}
	return ids, positions
}

func streamMsgs(t testing.TB, st jetstream.Stream) int {
	info, err := st.Info(context.Background())
	require.NoError(t, err)
	return int(info.State.Msgs)
}

// requireExactlyOnceInOrder: the stream holds each event of type typ exactly
// once, in log order, with the id "<schema>-<position>".
func requireExactlyOnceInOrder(t testing.TB, s *eventstore.Store, st jetstream.Stream, typ string) {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), query.Tagged([]string{typ}), nil)
	require.NoError(t, err)
	ids, positions := consumeAll(t, st)
	require.Len(t, ids, len(evs))
	for i, ev := range evs {
		require.Equal(t, ev.Position, positions[i], "message %d out of order", i)
		require.Equal(t, fmt.Sprintf("%s-%d", s.Schema(), ev.Position), ids[i])
	}
}

func run(t *testing.T, r *outbox.Relay) (stop func()) {
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

var fast = &outbox.Config{
	BatchSize: 50,
	ReaderConfig: projection.ReaderConfig{
		PollInterval:      20 * time.Millisecond,
		ElectionInterval:  50 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond,
		RetryMin:          time.Millisecond,
		RetryMax:          20 * time.Millisecond,
	},
}

func TestJetStreamExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, inflight := range []int{1, 64} {
		t.Run(fmt.Sprint("inflight=", inflight), func(t *testing.T) {
			s := newStore(t)
			js, st, prefix := testStream(t)
			pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: inflight})
			require.NoError(t, err)
			r, err := outbox.New(s, outbox.Topic{Name: "orders", Query: query.Tagged([]string{"OrderPlaced"})}, "nats", pub, fast)
			require.NoError(t, err)
			appendN(t, s, "OrderPlaced", 300, 100)
			appendN(t, s, "Other", 50, 50)
			run(t, r)
			appendN(t, s, "OrderPlaced", 200, 7)
			require.Eventually(t, func() bool { return streamMsgs(t, st) >= 500 }, wait, 10*time.Millisecond)
			require.Eventually(t, func() bool {
				stat, err := r.Status(context.Background())
				require.NoError(t, err)
				return stat.Cursor.Position > 0 && !stat.HeartbeatAt.IsZero()
			}, wait, 10*time.Millisecond)
			requireExactlyOnceInOrder(t, s, st, "OrderPlaced")
		})
	}
}

// killingPublisher publishes the first n messages of its first batch, then
// blocks until its relay is stopped (killed mid-batch: those n messages were
// delivered, the checkpoint did not move).
type killingPublisher struct {
	inner   outbox.Publisher
	n       int
	stopped atomic.Bool
	reached chan struct{}
}

func (k *killingPublisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	if k.stopped.Load() {
		return errors.New("dead")
	}
	if err := k.inner.Publish(ctx, msgs[:k.n]); err != nil {
		return err
	}
	k.stopped.Store(true)
	close(k.reached)
	<-ctx.Done()
	return ctx.Err()
}

// The relay is stopped in the middle of a batch, after part of it reached the
// broker; a restarted relay delivers the batch again and JetStream drops the
// duplicates: every event exactly once, in order.
func TestJetStreamKilledMidBatch(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s := newStore(t)
			js, st, prefix := testStream(t)
			pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: 16})
			require.NoError(t, err)
			topic := outbox.Topic{Name: "orders", Query: query.Tagged([]string{"OrderPlaced"})}
			appendN(t, s, "OrderPlaced", 400, 100)
			kp := &killingPublisher{inner: pub, n: 10 + round*15, reached: make(chan struct{})}
			r1, err := outbox.New(s, topic, "nats", kp, fast)
			require.NoError(t, err)
			stop := run(t, r1)
			<-kp.reached
			stop() // "killed": the batch's transaction never commits
			stat, err := r1.Status(context.Background())
			require.NoError(t, err)
			require.Zero(t, stat.Cursor.Position, "the checkpoint moved past an unacknowledged batch")
			require.Equal(t, kp.n, streamMsgs(t, st))

			r2, err := outbox.New(s, topic, "nats", pub, fast)
			require.NoError(t, err)
			run(t, r2)
			require.Eventually(t, func() bool { return streamMsgs(t, st) >= 400 }, wait, 10*time.Millisecond)
			requireExactlyOnceInOrder(t, s, st, "OrderPlaced")
		})
	}
}

func closedPort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// A broker that is down: attempts are counted with backoff until FAILED;
// after Resume with a working broker, delivery continues from the same
// checkpoint.
func TestBrokerDown(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	topic := outbox.Topic{Name: "orders", Query: query.Tagged([]string{"OrderPlaced"})}

	// A connection to a server that is not there (it keeps trying to
	// reconnect and buffers nothing: publishes fail).
	port := closedPort(t)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectBufSize(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	deadJS, err := jetstream.New(nc)
	require.NoError(t, err)
	deadPub, err := jspublisher.New(deadJS, nil)
	require.NoError(t, err)

	appendN(t, s, "OrderPlaced", 120, 40)
	cfg := *fast
	cfg.MaxAttempts = 4
	cfg.RetryMin = 10 * time.Millisecond
	cfg.PublishTimeout = 200 * time.Millisecond
	// Each attempt records the error count it starts with (the previous
	// attempt's failure is committed before the next one begins), so the
	// count is checked at every attempt without sampling a time window.
	var (
		mu   sync.Mutex
		seen []int
	)
	name := outbox.CheckpointName(topic.Name, "nats")
	counting := outbox.PublisherFunc(func(ctx context.Context, msgs []outbox.Message) error {
		// Not bounded by the publish timeout: on a loaded machine the read
		// alone can outlast it and fail the attempt before it is recorded.
		stat, err := projection.GetStatus(context.WithoutCancel(ctx), s, name)
		if err != nil {
			return err
		}
		mu.Lock()
		seen = append(seen, stat.ErrorCount)
		mu.Unlock()
		return deadPub.Publish(ctx, msgs)
	})
	r1, err := outbox.New(s, topic, "nats", counting, &cfg)
	require.NoError(t, err)
	stop := run(t, r1)
	require.Eventually(t, func() bool {
		stat, err := r1.Status(ctx)
		if errors.Is(err, projection.ErrNotFound) {
			return false // the relay has not started yet
		}
		require.NoError(t, err)
		return stat.State == projection.Failed
	}, wait, 2*time.Millisecond)
	stat, err := r1.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, stat.ErrorCount)
	require.NotEmpty(t, stat.LastError)
	require.Less(t, stat.Cursor.Position, int64(1), "a failed delivery moved the checkpoint")
	stop()
	mu.Lock()
	require.Equal(t, []int{0, 1, 2, 3}, seen, "attempts were not counted one by one")
	mu.Unlock()
	failedAt := stat.Cursor

	// Resume with a working broker.
	js, st, prefix := testStream(t)
	pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix})
	require.NoError(t, err)
	r2, err := outbox.New(s, topic, "nats", pub, fast)
	require.NoError(t, err)
	stat, err = r2.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, projection.Failed, stat.State)
	require.Equal(t, failedAt, stat.Cursor)
	require.NoError(t, r2.Resume(ctx))
	run(t, r2)
	require.Eventually(t, func() bool { return streamMsgs(t, st) >= 120 }, wait, 10*time.Millisecond)
	requireExactlyOnceInOrder(t, s, st, "OrderPlaced")
	require.Eventually(t, func() bool {
		stat, err := r2.Status(ctx)
		require.NoError(t, err)
		return stat.State == projection.Active && stat.ErrorCount == 0
	}, wait, 10*time.Millisecond)
}

func TestInvalidTopic(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	pub := outbox.PublisherFunc(func(context.Context, []outbox.Message) error { return nil })
	for _, c := range []struct {
		name  string
		topic outbox.Topic
	}{
		{"empty name", outbox.Topic{Name: "", Query: query.All()}},
		{"upper case", outbox.Topic{Name: "Orders", Query: query.All()}},
		{"dot", outbox.Topic{Name: "a.b", Query: query.All()}},
		{"no query", outbox.Topic{Name: "orders"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := outbox.New(s, c.topic, "p", pub, nil)
			require.ErrorIs(t, err, outbox.ErrInvalidTopic, "%+v", c.topic)
		})
	}
	_, err := outbox.New(s, outbox.Topic{Name: "orders", Query: query.All()}, "P!", pub, nil)
	require.ErrorIs(t, err, outbox.ErrInvalidTopic)
}
