package jspublisher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// The relay of a store whose reads go to a standby
// (eventstore.Config.ReadPool) reads the standby and publishes to NATS
// JetStream: while the standby's replay is paused it publishes nothing of the
// events the primary committed (a heartbeat written after a batch shows that
// the relay ran); once replay resumes every event is published once, in log
// order.
func TestStandbyRelayToNATS(t *testing.T) {
	pair := pgtest.StandbyPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pp, sp, schema := pair.Migrated(t)
	s, err := eventstore.New(pp, &eventstore.Config{Schema: schema, ReadPool: sp})
	require.NoError(t, err)
	defer s.Close(context.Background())
	js, st, prefix := testStream(t)
	pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix})
	require.NoError(t, err)
	r, err := outbox.New(s, outbox.Topic{Name: "orders", Query: query.Tagged([]string{"OrderPlaced"})}, "nats", pub, fast)
	require.NoError(t, err)

	require.NoError(t, pair.Standby.PauseReplay(ctx))
	t.Cleanup(func() { _ = pair.Standby.ResumeReplay(context.Background()) })
	appendN(t, s, "OrderPlaced", 30, 10)
	stop := run(t, r)
	heartbeat := func() time.Time {
		stat, err := r.Status(ctx)
		if errors.Is(err, projection.ErrNotFound) {
			return time.Time{} // the relay has not written its checkpoint yet
		}
		require.NoError(t, err)
		return stat.HeartbeatAt
	}
	var first time.Time
	require.Eventually(t, func() bool { first = heartbeat(); return !first.IsZero() }, wait, 5*time.Millisecond)
	// The leader writes a heartbeat only after a batch: a later one shows
	// that a batch ran.
	require.Eventually(t, func() bool { return heartbeat().After(first) }, wait, 5*time.Millisecond)
	require.Zero(t, streamMsgs(t, st), "the relay read the standby, whose replay is paused")

	require.NoError(t, pair.Standby.ResumeReplay(ctx))
	appendN(t, s, "OrderPlaced", 20, 7)
	appendN(t, s, "Other", 5, 5)
	require.Eventually(t, func() bool { return streamMsgs(t, st) >= 50 }, wait, 10*time.Millisecond)
	stop()
	require.NoError(t, pair.Sync(ctx))
	requireExactlyOnceInOrder(t, s, st, "OrderPlaced")
}
