package jspublisher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
)

// benchBatch returns n messages of topic "orders" from position first on.
func benchBatch(first, n int) []outbox.Message {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		pos := int64(first + i)
		msgs[i] = outbox.Message{ID: fmt.Sprintf("bench-%d", pos), Topic: "orders", Event: pgdcb.StoredEvent{
			Event:    pgdcb.MustEvent("OrderPlaced", map[string]int{"amount": 12}, "order=o1"),
			Position: pos, TransactionID: uint64(1000 + pos), OccurredAt: time.Now(),
		}}
	}
	return msgs
}

// BenchmarkJetStreamPublish measures Publisher.Publish on the shared
// broker, batches of 100 (the relay's default), against the bare nats.go
// calls the publisher makes ("bare": what Publish did before it watched the
// connection and reconciled); "redelivery" publishes a batch the stream
// already holds: a reconciliation (the last message, then one request per
// message walked back over) that sends nothing.
//
//	go test -run '^$' -bench JetStreamPublish .  (in outbox/jspublisher)
func BenchmarkJetStreamPublish(b *testing.B) {
	const batch = 100
	ctx := context.Background()
	for _, inflight := range []int{1, 64} {
		b.Run(fmt.Sprint("publisher/inflight=", inflight), func(b *testing.B) {
			js, _, prefix := testStream(b)
			pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: inflight})
			require.NoError(b, err)
			b.ResetTimer()
			for i := range b.N {
				require.NoError(b, pub.Publish(ctx, benchBatch(i*batch+1, batch)))
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
		b.Run(fmt.Sprint("bare/inflight=", inflight), func(b *testing.B) {
			js, _, prefix := testStream(b)
			pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix})
			require.NoError(b, err)
			b.ResetTimer()
			for i := range b.N {
				msgs := benchBatch(i*batch+1, batch)
				futures := make([]jetstream.PubAckFuture, 0, inflight)
				for _, m := range msgs {
					nm, err := pub.NatsMsg(m)
					require.NoError(b, err)
					if inflight == 1 {
						_, err := js.PublishMsg(ctx, nm)
						require.NoError(b, err)
						continue
					}
					f, err := js.PublishMsgAsync(nm)
					require.NoError(b, err)
					if futures = append(futures, f); len(futures) == inflight {
						for _, f := range futures {
							<-f.Ok()
						}
						futures = futures[:0]
					}
				}
				for _, f := range futures {
					<-f.Ok()
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
	b.Run("redelivery", func(b *testing.B) {
		js, _, prefix := testStream(b)
		pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix})
		require.NoError(b, err)
		msgs := benchBatch(1, batch)
		require.NoError(b, pub.Publish(ctx, msgs))
		b.ResetTimer()
		for range b.N {
			require.NoError(b, pub.Publish(ctx, msgs))
		}
	})
}
