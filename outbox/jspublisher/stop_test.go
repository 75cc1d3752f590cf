package jspublisher_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/stopcheck"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
	"github.com/pgdcb/pgdcb/query"
)

// Run(ctx) is the relay's lifecycle: cancelled while it publishes (through
// JetStream, whose acks it waits for), it returns only after the publish
// has returned and every goroutine it started (its runner's, the LISTEN
// connection's, the publisher's connection watch) has ended; nothing is
// published after it. Then Store.Close returns and leaves no store
// goroutine behind.
func TestRunStopsCleanly(t *testing.T) {
	s := newStore(t)
	js, _, prefix := testStream(t)
	jsp, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix})
	require.NoError(t, err)
	entered := make(chan struct{})
	var busy, after atomic.Int64
	var returned atomic.Bool
	pub := outbox.PublisherFunc(func(ctx context.Context, msgs []outbox.Message) error {
		if returned.Load() {
			after.Add(1)
		}
		busy.Add(1)
		defer busy.Add(-1)
		if err := jsp.Publish(ctx, msgs); err != nil {
			return err
		}
		select {
		case <-entered:
		default:
			close(entered)
		}
		<-ctx.Done() // runs until Run's context ends
		return ctx.Err()
	})
	r, err := outbox.New(s, outbox.Topic{Name: "orders", Query: query.Tagged([]string{"OrderPlaced"})}, "nats", pub, fast)
	require.NoError(t, err)
	appendN(t, s, "OrderPlaced", 5, 5)
	run := stopcheck.Stop(t, r.Run, entered, busy.Load, wait,
		"github.com/pgdcb/pgdcb/outbox", "github.com/pgdcb/pgdcb/projection",
		"github.com/pgdcb/pgdcb/internal/wake", "github.com/pgdcb/pgdcb/subscription")
	returned.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	require.Empty(t, run.Gone(stopcheck.Grace, "github.com/pgdcb/pgdcb/eventstore"), "store goroutines after Close")
	require.Zero(t, after.Load(), "published after Run returned")
}
