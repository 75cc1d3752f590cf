package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers the JetStream publisher sets besides jetstream.MsgIDHeader
// (Nats-Msg-Id, the Message.ID). The message data is the event's data.
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

// JetStreamConfig configures a JetStreamPublisher. nil or the zero value means
// every default.
type JetStreamConfig struct {
	// Subject returns the subject of a message. Default: SubjectPrefix + "." +
	// the topic name.
	Subject func(m Message) string
	// SubjectPrefix is used by the default Subject. Default "pgdcb".
	SubjectPrefix string
	// MaxInFlight is how many messages may await their ack at once. 1 (the
	// default) publishes one message at a time: strict log order in the
	// stream even when the broker refuses a message in the middle of a
	// batch. Larger values pipeline the batch for throughput; then a refused
	// message followed by accepted ones is stored again after them on retry
	// (the accepted ones are deduplicated), so order holds only while the
	// broker accepts everything.
	MaxInFlight int
}

// JetStreamPublisher publishes to NATS JetStream, each message with
// Nats-Msg-Id = Message.ID so the stream drops redelivered duplicates (within
// its Duplicates window, 2 minutes by default: a relay that stays FAILED
// longer may deliver duplicates after Resume).
type JetStreamPublisher struct {
	js  jetstream.JetStream
	cfg JetStreamConfig
}

// NewJetStreamPublisher returns a publisher over js. A stream must capture
// the subjects (create it yourself: retention and replicas are your choice).
func NewJetStreamPublisher(js jetstream.JetStream, cfg *JetStreamConfig) (*JetStreamPublisher, error) {
	if js == nil {
		return nil, errors.New("pgdcb: outbox.NewJetStreamPublisher: nil JetStream")
	}
	var c JetStreamConfig
	if cfg != nil {
		c = *cfg
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = "pgdcb"
	}
	if c.Subject == nil {
		prefix := c.SubjectPrefix
		c.Subject = func(m Message) string { return prefix + "." + m.Topic }
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 1
	}
	return &JetStreamPublisher{js: js, cfg: c}, nil
}

// NatsMsg builds the NATS message of m with the publisher's subject.
func (p *JetStreamPublisher) NatsMsg(m Message) (*nats.Msg, error) {
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

// Publish implements Publisher: it returns nil once JetStream acknowledged
// (stored, or recognised as a duplicate) every message.
func (p *JetStreamPublisher) Publish(ctx context.Context, msgs []Message) error {
	if p.cfg.MaxInFlight == 1 {
		for _, m := range msgs {
			nm, err := p.NatsMsg(m)
			if err != nil {
				return err
			}
			if _, err := p.js.PublishMsg(ctx, nm); err != nil {
				return fmt.Errorf("message %s: %w", m.ID, err)
			}
		}
		return nil
	}
	pending := make([]jetstream.PubAckFuture, 0, p.cfg.MaxInFlight)
	ids := make([]string, 0, p.cfg.MaxInFlight)
	drain := func() error {
		for i, f := range pending {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("message %s: %w", ids[i], err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		pending, ids = pending[:0], ids[:0]
		return nil
	}
	for _, m := range msgs {
		nm, err := p.NatsMsg(m)
		if err != nil {
			return err
		}
		f, err := p.js.PublishMsgAsync(nm)
		if err != nil {
			return fmt.Errorf("message %s: %w", m.ID, err)
		}
		pending = append(pending, f)
		ids = append(ids, m.ID)
		if len(pending) == p.cfg.MaxInFlight {
			if err := drain(); err != nil {
				return err
			}
		}
	}
	return drain()
}
