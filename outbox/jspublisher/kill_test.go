package jspublisher_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/outbox"
	"github.com/pgdcb/pgdcb/outbox/jspublisher"
	"github.com/pgdcb/pgdcb/query"
)

const (
	helperSchemaEnv  = "PGDCB_OUTBOX_HELPER_SCHEMA"
	helperSubjectEnv = "PGDCB_OUTBOX_HELPER_SUBJECT"
	// helperDSNEnv, when set, is the server of the helper's store (else
	// pgtest's); helperLogicalEnv=1 runs the relay in logical decoding mode.
	helperDSNEnv     = "PGDCB_OUTBOX_HELPER_DSN"
	helperLogicalEnv = "PGDCB_OUTBOX_HELPER_LOGICAL"
)

var ordersTopic = outbox.Topic{Name: "orders", Query: query.Tagged([]string{"OrderPlaced"})}

// TestHelperRelay is the child process of TestJetStreamSIGKILL and
// TestLogicalRelaySIGKILL: a relay whose publisher prints HALF once half of
// a batch was acknowledged, then lingers.
func TestHelperRelay(t *testing.T) {
	schema := os.Getenv(helperSchemaEnv)
	if schema == "" {
		t.Skip("child process of TestJetStreamSIGKILL")
	}
	dsn := os.Getenv(helperDSNEnv)
	if dsn == "" {
		dsn = pgtest.DSN(t)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	s, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	require.NoError(t, err)
	nc, err := nats.Connect(natsURL, nats.ReconnectBufSize(-1))
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: os.Getenv(helperSubjectEnv), MaxInFlight: 8})
	require.NoError(t, err)
	slow := outbox.PublisherFunc(func(ctx context.Context, msgs []outbox.Message) error {
		h := len(msgs) / 2
		if err := pub.Publish(ctx, msgs[:h]); err != nil {
			return err
		}
		fmt.Println("HALF")
		time.Sleep(20 * time.Millisecond)
		return pub.Publish(ctx, msgs[h:])
	})
	cfg := fast
	if os.Getenv(helperLogicalEnv) == "1" {
		cfg = logicalFast()
	}
	r, err := outbox.New(s, ordersTopic, "nats", slow, cfg)
	require.NoError(t, err)
	_ = r.Run(context.Background()) // until killed
}

// The relay's process is killed with SIGKILL in the middle of a batch (at
// varied points); a restarted relay delivers the rest, and a JetStream
// consumer sees every event exactly once, in log order.
func TestJetStreamSIGKILL(t *testing.T) {
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s := newStore(t)
			js, st, prefix := testStream(t)
			appendN(t, s, "OrderPlaced", 600, 100)

			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRelay$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperSchemaEnv+"="+s.Schema(), helperSubjectEnv+"="+prefix)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			sc := bufio.NewScanner(out)
			for n := 0; n < 2+round && sc.Scan(); {
				if sc.Text() == "HALF" {
					n++
				}
			}
			time.Sleep(time.Duration(round*9) * time.Millisecond)
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			require.Less(t, streamMsgs(t, st), 600)

			pub, err := jspublisher.New(js, &jspublisher.Config{SubjectPrefix: prefix, MaxInFlight: 8})
			require.NoError(t, err)
			r, err := outbox.New(s, ordersTopic, "nats", pub, fast)
			require.NoError(t, err)
			run(t, r)
			require.Eventually(t, func() bool { return streamMsgs(t, st) >= 600 }, wait, 10*time.Millisecond)
			requireExactlyOnceInOrder(t, s, st, "OrderPlaced")
		})
	}
}
