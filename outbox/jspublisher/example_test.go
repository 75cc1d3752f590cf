package jspublisher_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// A relay delivers the OrderPlaced events to a JetStream stream, exactly once
// and in log order, and reports how its deliveries go.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := "pgdcb_test_example_outbox_" + strconv.Itoa(os.Getpid())
	defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		panic(err)
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		panic(err)
	}

	// Reconnect for ever, and quickly: a broker restart then costs about
	// ReconnectWait, not the publish timeout.
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	stream := "PGDCB_EXAMPLE_" + strconv.Itoa(os.Getpid())
	prefix := "pgdcbexample_" + strconv.Itoa(os.Getpid())
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		panic(err)
	}
	defer js.DeleteStream(context.WithoutCancel(ctx), stream)

	for _, order := range []string{"o1", "o2", "o3"} {
		if _, err := store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("OrderPlaced", map[string]string{"order": order}, "order="+order)}); err != nil {
			panic(err)
		}
	}
	pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix})
	if err != nil {
		panic(err)
	}
	relay, err := outbox.New(store, outbox.Topic{Name: "orders", Query: query.Tagged([]string{"OrderPlaced"})}, "nats", pub,
		&outbox.Config{StallAfter: 5 * time.Second, ReaderConfig: projection.ReaderConfig{PollInterval: 50 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- relay.Run(ctx) }()
	var status outbox.Status
	poll := time.NewTicker(10 * time.Millisecond) // until the broker holds the 3 messages, for a minute at most
	defer poll.Stop()
	for deadline := time.After(time.Minute); ; {
		info, err := st.Info(ctx)
		if err == nil && info.State.Msgs == 3 {
			if status, err = relay.Status(ctx); err == nil && !status.LastAckAt.IsZero() {
				break
			}
		}
		select {
		case <-poll.C:
		case <-deadline:
			panic("the relay did not publish the 3 events")
		}
	}
	cancel()
	<-done

	msg, err := st.GetLastMsgForSubject(context.Background(), prefix+".orders")
	if err != nil {
		panic(err)
	}
	fmt.Println(msg.Subject == prefix+".orders", string(msg.Data), msg.Header.Get(jspublisher.HeaderTopic))
	fmt.Println("acknowledged:", !status.LastAckAt.IsZero(), "stalled:", status.Stalled)
	// Output:
	// true {"order": "o3"} orders
	// acknowledged: true stalled: false
}
