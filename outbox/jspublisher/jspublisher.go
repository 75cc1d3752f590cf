package jspublisher

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/retry"
	"github.com/pgdcb/pgdcb/outbox"
)

// Headers the JetStream publisher sets besides jetstream.MsgIDHeader
// (Nats-Msg-Id, the outbox.Message.ID). The message data is the event's data.
// Reconciliation reads HeaderTopic, HeaderPosition and HeaderTransactionID
// back from the stream.
const (
	HeaderType          = "Pgdcb-Type"
	HeaderTags          = "Pgdcb-Tags" // JSON array of "key=value"
	HeaderPosition      = "Pgdcb-Position"
	HeaderTransactionID = "Pgdcb-Transaction-Id"
	HeaderEventID       = "Pgdcb-Event-Id" // only when the event has one
	HeaderMetadata      = "Pgdcb-Metadata" // JSON; only when the event has metadata
	HeaderOccurredAt    = "Pgdcb-Occurred-At"
	HeaderTopic         = "Pgdcb-Topic"
)

// Defaults of Config.
const (
	DefaultAckTimeout    = 5 * time.Second
	DefaultMaxInFlight   = 1
	DefaultSubjectPrefix = "pgdcb"
)

// Bounds of the pause between two attempts inside one Publish call (after a
// lost connection, a lost ack, or a JetStream not ready yet).
const (
	reattemptMin = 10 * time.Millisecond
	reattemptMax = 250 * time.Millisecond
)

// Config configures a Publisher. nil or the zero value means
// every default; New refuses negative values with a
// *pgdcb.InvalidArgumentError.
type Config struct {
	// Subject returns the subject of a message. Default: SubjectPrefix + "." +
	// the topic name. Reconciliation asks the stream for the last message of
	// each subject of a batch: one request per distinct subject, so a
	// subject per event makes it as costly as the publish itself.
	Subject func(m outbox.Message) string
	// SubjectPrefix is used by the default Subject. Default "pgdcb"
	// (DefaultSubjectPrefix).
	SubjectPrefix string
	// MaxInFlight is how many messages may await their ack at once. 0: the
	// default, 1, which publishes one message at a time: strict log order in
	// the stream even when the broker refuses a message in the middle of a
	// batch. Larger values pipeline the batch for throughput; then a refused
	// message followed by accepted ones is stored again after them on retry
	// (the accepted ones are deduplicated), so order holds only while the
	// broker accepts everything. Above 1, New refuses a connection not made
	// with nats.ReconnectBufSize(-1): a publish the client buffered while it
	// reconnected would be sent after the messages lost with the broker.
	MaxInFlight int
	// AckTimeout bounds the wait for one message's ack, and for each request
	// reconciliation makes, while the connection stays up (a lost connection
	// ends the wait at once); the attempt is then made again, within the same
	// Publish call. 0: the default, 5s.
	AckTimeout time.Duration
	// Logger receives the publisher's logs: failed publish attempts at Warn
	// with the error under "err". Default: none.
	Logger *slog.Logger
}

// validate refuses negative numbers and durations with a
// *pgdcb.InvalidArgumentError naming the field. New calls
// it first, then withDefaults.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	return cfgcheck.NonNegative(
		cfgcheck.Int("MaxInFlight", c.MaxInFlight, DefaultMaxInFlight),
		cfgcheck.Duration("AckTimeout", c.AckTimeout, DefaultAckTimeout),
	)
}

// withDefaults returns a copy of c (nil: the zero Config) with
// every zero field set to its default.
func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	o.SubjectPrefix = cmp.Or(o.SubjectPrefix, DefaultSubjectPrefix)
	if o.Subject == nil {
		prefix := o.SubjectPrefix
		o.Subject = func(m outbox.Message) string { return prefix + "." + m.Topic }
	}
	o.MaxInFlight = cmp.Or(o.MaxInFlight, DefaultMaxInFlight)
	o.AckTimeout = cmp.Or(o.AckTimeout, DefaultAckTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Publisher publishes to NATS JetStream, each message with
// Nats-Msg-Id = outbox.Message.ID so the stream drops redelivered duplicates within
// its Duplicates window, and reconciles with the stream so that redeliveries
// after the window do not reach it either (docs/OUTBOX.md).
//
// Publish survives a broker restart within its context: a lost connection
// ends the wait for acks at once, Publish waits for the client to reconnect
// (configure the nats.Conn to reconnect for ever: nats.MaxReconnects(-1), and
// quickly: nats.ReconnectWait), reconciles, and sends what the stream does not
// hold yet.
type Publisher struct {
	js  jetstream.JetStream
	nc  *nats.Conn
	cfg Config
	rec reconciler
}

// New returns a publisher over js. A stream must capture
// the subjects (create it yourself: retention and replicas are your choice).
func New(js jetstream.JetStream, cfg *Config) (*Publisher, error) {
	if js == nil {
		return nil, errors.New("pgdcb: jspublisher.New: nil JetStream")
	}
	if err := cfg.validate(); err != nil {
		return nil, errfmt.Errorf("pgdcb: jspublisher.New: %w", err)
	}
	c := cfg.withDefaults()
	if c.MaxInFlight > 1 && js.Conn().Opts.ReconnectBufSize >= 0 {
		return nil, errfmt.Errorf("pgdcb: jspublisher.New: %w", &pgdcb.InvalidArgumentError{Name: "Config.MaxInFlight",
			Reason: fmt.Sprintf("%d needs a connection made with nats.ReconnectBufSize(-1): a message the client buffers while it reconnects is sent after the reconnect, after the ones lost with the broker, out of log order", c.MaxInFlight)})
	}
	p := &Publisher{js: js, nc: js.Conn(), cfg: c}
	p.rec.init(js, c.Logger, c.AckTimeout)
	return p, nil
}

// NatsMsg builds the NATS message of m with the publisher's subject.
func (p *Publisher) NatsMsg(m outbox.Message) (*nats.Msg, error) {
	ev := m.Event
	tagsJSON, err := json.Marshal(ev.Tags.Strings())
	if err != nil {
		return nil, err
	}
	h := nats.Header{}
	h.Set(jetstream.MsgIDHeader, m.ID)
	h.Set(HeaderTopic, m.Topic)
	h.Set(HeaderType, ev.Type)
	h.Set(HeaderTags, string(tagsJSON))
	h.Set(HeaderPosition, strconv.FormatInt(ev.Position, 10))
	h.Set(HeaderTransactionID, strconv.FormatUint(ev.TransactionID, 10))
	h.Set(HeaderOccurredAt, ev.OccurredAt.UTC().Format(time.RFC3339Nano))
	if ev.ID != uuid.Nil {
		h.Set(HeaderEventID, ev.ID.String())
	}
	if len(ev.Metadata) > 0 {
		h.Set(HeaderMetadata, string(ev.Metadata))
	}
	return &nats.Msg{Subject: p.cfg.Subject(m), Data: ev.Data, Header: h}, nil
}

// outMsg is one message of a batch on its way to the stream.
type outMsg struct {
	m   outbox.Message
	nm  *nats.Msg
	key logKey
}

// Publish implements outbox.Publisher: it returns nil once every message is in the
// stream — acknowledged by JetStream (stored, or recognised as a duplicate),
// or found there by reconciliation. Until ctx ends it rides out a lost
// connection, a lost ack and a JetStream that is not ready yet, sending again
// what is not acknowledged; a message JetStream refuses (an API error) ends
// it at once.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	batch := make([]outMsg, len(msgs))
	for i, m := range msgs {
		nm, err := p.NatsMsg(m)
		if err != nil {
			return fmt.Errorf("message %s: %w", m.ID, err)
		}
		batch[i] = outMsg{m: m, nm: nm, key: keyOf(m.Event)}
	}
	p.rec.observeTerm(ctx, msgs)
	p.rec.observeReconnects(p.nc.Stats().Reconnects)
	for attempt := 1; ; attempt++ {
		err := p.attempt(ctx, &batch)
		if err == nil {
			return nil
		}
		p.rec.invalidate() // what the stream holds is uncertain now
		if ctx.Err() != nil || !transient(err) {
			return err
		}
		d := retry.Delay(attempt, reattemptMin, reattemptMax)
		p.cfg.Logger.WarnContext(ctx, "pgdcb: jspublisher: publish attempt failed; trying again", "err", err, "attempt", attempt, "retry_in", d)
		if retry.Sleep(ctx, d) != nil {
			return err
		}
	}
}

// attempt waits for the connection, drops what the stream already holds, and
// sends the rest; *batch keeps what is still not acknowledged.
func (p *Publisher) attempt(ctx context.Context, batch *[]outMsg) error {
	if err := p.waitConnected(ctx); err != nil {
		return err
	}
	ctx, stop := p.watchConnection(ctx)
	defer stop()
	rest, err := p.rec.skipHeld(ctx, *batch)
	if err != nil {
		return err
	}
	*batch = rest
	var n int
	if p.cfg.MaxInFlight == 1 {
		n, err = p.sendOneByOne(ctx, rest)
	} else {
		n, err = p.sendPipelined(ctx, rest)
	}
	*batch = rest[n:]
	if err != nil {
		return withCause(ctx, err)
	}
	return nil
}

// sendOneByOne sends each message after the previous one's ack; it returns how
// many were acknowledged.
func (p *Publisher) sendOneByOne(ctx context.Context, msgs []outMsg) (int, error) {
	for i, o := range msgs {
		actx, cancel := context.WithTimeoutCause(ctx, p.cfg.AckTimeout, errAckTimeout)
		_, err := p.js.PublishMsg(actx, o.nm)
		cancel()
		if err != nil {
			return i, fmt.Errorf("message %s: %w", o.m.ID, withCause(actx, err))
		}
		p.rec.acked(o)
	}
	return len(msgs), nil
}

// sendPipelined keeps up to MaxInFlight messages awaiting their ack; it
// returns how many were acknowledged in order (a prefix of msgs).
func (p *Publisher) sendPipelined(ctx context.Context, msgs []outMsg) (acked int, _ error) {
	var pending []jetstream.PubAckFuture
	timer := time.NewTimer(p.cfg.AckTimeout)
	defer timer.Stop()
	drain := func() error {
		for _, f := range pending {
			timer.Reset(p.cfg.AckTimeout)
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("message %s: %w", msgs[acked].m.ID, err)
			case <-timer.C:
				return fmt.Errorf("message %s: %w", msgs[acked].m.ID, errAckTimeout)
			case <-ctx.Done():
				return fmt.Errorf("message %s: %w", msgs[acked].m.ID, context.Cause(ctx))
			}
			p.rec.acked(msgs[acked])
			acked++
		}
		pending = pending[:0]
		return nil
	}
	for _, o := range msgs {
		// Never hand a message to the client's reconnect buffer: it would
		// be sent after the reconnect, possibly after a hole.
		if st := p.nc.Status(); st != nats.CONNECTED {
			return acked, fmt.Errorf("message %s: %w (%v)", o.m.ID, errDisconnected, st)
		}
		f, err := p.js.PublishMsgAsync(o.nm)
		if err != nil {
			if derr := drain(); derr != nil {
				return acked, derr
			}
			return acked, fmt.Errorf("message %s: %w", o.m.ID, err)
		}
		pending = append(pending, f)
		if len(pending) == p.cfg.MaxInFlight {
			if err := drain(); err != nil {
				return acked, err
			}
		}
	}
	return acked, drain()
}

var (
	errDisconnected = errors.New("pgdcb: jspublisher: connection to the broker lost")
	errAckTimeout   = errors.New("pgdcb: jspublisher: no answer from the broker within AckTimeout")
)

// withCause returns err, or the cause of ctx's end (errDisconnected,
// errAckTimeout) wrapped with err when ctx ended for such a cause.
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// transient reports whether err may go away by itself, so that Publish tries
// again within its context: a lost connection, a lost ack, nobody answering
// (JetStream restarting), or JetStream answering "unavailable". Anything else
// (a message JetStream refuses, no stream for the subject, a closed
// connection) ends Publish at once.
func transient(err error) bool {
	var jerr jetstream.JetStreamError
	if errors.As(err, &jerr) {
		if api := jerr.APIError(); api != nil {
			return api.Code == 503
		}
	}
	for _, t := range []error{
		errDisconnected, errAckTimeout,
		nats.ErrDisconnected, nats.ErrConnectionReconnecting, nats.ErrReconnectBufExceeded,
		nats.ErrNoResponders, nats.ErrTimeout,
		jetstream.ErrNoStreamResponse, jetstream.ErrAsyncPublishTimeout,
	} {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// waitConnected returns once the connection is up, or ctx's error, or
// nats.ErrConnectionClosed.
func (p *Publisher) waitConnected(ctx context.Context) error {
	if p.nc.Status() == nats.CONNECTED {
		return nil
	}
	ch := p.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	defer p.nc.RemoveStatusListener(ch)
	for {
		switch p.nc.Status() {
		case nats.CONNECTED:
			return nil
		case nats.CLOSED:
			return nats.ErrConnectionClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the broker: %w", errDisconnected, ctx.Err())
		}
	}
}

// watchConnection returns a context that ends with cause errDisconnected as
// soon as the connection drops, so no wait for an ack outlives the
// connection that would carry it.
func (p *Publisher) watchConnection(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	ch := p.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case _, ok := <-ch:
			if ok {
				cancel(errDisconnected)
			}
		case <-ctx.Done():
		}
	})
	if p.nc.Status() != nats.CONNECTED { // dropped before the listener was in place
		cancel(errDisconnected)
	}
	return ctx, func() {
		cancel(nil)
		p.nc.RemoveStatusListener(ch)
		wg.Wait()
	}
}
