package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/relayterm"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// ErrInvalidTopic: a topic or publisher name is not 1..64 characters of
// [a-z0-9_-], or the topic's query is empty or invalid.
var ErrInvalidTopic = errors.New("pgdcb: outbox: invalid topic")

// Topic is a named stream of events: those matching Query.
type Topic struct {
	// Name: 1..64 characters of [a-z0-9_-].
	Name  string
	Query query.Query
}

// Message is one event on its way out.
type Message struct {
	// ID is stable across retries: "<schema>-<position>". Brokers that
	// deduplicate by id drop redeliveries.
	ID    string
	Topic string
	Event pgdcb.StoredEvent
}

// Publisher delivers messages to an external system. Publish returns nil only
// when the broker acknowledged every message; it must deliver them in the
// order given (a later message must not be acknowledged when an earlier one
// was not). On error the whole batch is delivered again later.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message) error
}

// PublisherFunc adapts a function to Publisher.
type PublisherFunc func(ctx context.Context, msgs []Message) error

// Publish implements Publisher.
func (f PublisherFunc) Publish(ctx context.Context, msgs []Message) error { return f(ctx, msgs) }

// Defaults of Config.
const (
	defaultBatchSize      = 100
	defaultPublishTimeout = 30 * time.Second
	defaultStallAfter     = 10 * time.Second
)

// Config configures a Relay. nil or the zero value means every default: in
// every numeric and duration field 0 means the default; New refuses negative
// values with a *pgdcb.InvalidArgumentError.
type Config struct {
	// BatchSize is the most messages per Publish call. 0: the default, 100.
	BatchSize int
	// PublishTimeout bounds one Publish call (a timeout counts as a failed
	// attempt). 0: the default, 30s.
	PublishTimeout time.Duration
	// StallAfter: a message waiting this long for its ack (across failed
	// attempts) makes Status.Stalled true and the stalled gauge 1. 0: the
	// default, 10s.
	StallAfter time.Duration
	// ReaderConfig holds the settings of the relay's projection.Runner,
	// passed on whole, with projection's defaults: polling, election, the
	// backoff between failed deliveries (RetryMin, RetryMax), MaxAttempts
	// failed deliveries in a row before the relay is FAILED (it then waits
	// for Resume and continues from the same checkpoint), Identity, Tracer
	// (the relay's batches and, when it implements
	// subscription.StatusTracer, its errors, lag, leadership and FAILED:
	// pgdcbprom.New) and Logger.
	projection.ReaderConfig
	// DeliveryTracer observes each publish and, when it implements
	// RelayTracer, the relay's last ack, publish in flight and stalled
	// condition (pgdcbprom.New; pgdcbotel.New for spans).
	// Default nil.
	DeliveryTracer Tracer
	// Logical, when set, feeds the relay from logical decoding (passed to
	// projection.Config.Logical; package logical): messages are published
	// in the order their transactions COMMITTED, so a transaction left open
	// in the same database no longer holds delivery back. The server needs
	// wal_level=logical and a role that may replicate (docs/OUTBOX.md
	// "Logical decoding mode"). Default nil: tail reads, in log order.
	Logical *logical.Config
}

// validate refuses negative numbers and durations among the relay's own
// fields, with a *pgdcb.InvalidArgumentError naming the field; projection.New
// checks ReaderConfig's under the same names. New calls it first.
func (c *Config) validate() error {
	if c == nil {
		return nil
	}
	return cfgcheck.NonNegative(
		cfgcheck.Int("BatchSize", c.BatchSize, defaultBatchSize),
		cfgcheck.Duration("PublishTimeout", c.PublishTimeout, defaultPublishTimeout),
		cfgcheck.Duration("StallAfter", c.StallAfter, defaultStallAfter),
	)
}

// withDefaults returns a copy of c (nil: the zero Config) with the relay's
// own zero fields set to their defaults (projection.New fills
// ReaderConfig's). New calls it after validate.
func (c *Config) withDefaults() Config {
	var o Config
	if c != nil {
		o = *c
	}
	o.BatchSize = cmp.Or(o.BatchSize, defaultBatchSize)
	o.PublishTimeout = cmp.Or(o.PublishTimeout, defaultPublishTimeout)
	o.StallAfter = cmp.Or(o.StallAfter, defaultStallAfter)
	return o
}

// Relay delivers one topic through one publisher.
type Relay struct {
	store  *eventstore.Store
	topic  Topic
	name   string
	pub    Publisher
	runner *projection.Runner

	delivery delivery
	tracer   Tracer
	// The leadership term of the batches: a new leader connection is a new
	// term, after which the publisher reconciles with the broker again.
	termMu   sync.Mutex
	termConn *pgx.Conn
	term     uint64
}

var nameRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// CheckpointName is the checkpoint row of topic's publisher publisherName.
func CheckpointName(topic, publisherName string) string {
	return "outbox:" + topic + ":" + publisherName
}

// New returns a relay of topic through pub; publisherName tells apart several
// publishers of one topic (each has its own checkpoint). It fails with
// ErrInvalidTopic on a bad name or query, and with a
// *pgdcb.InvalidArgumentError naming a Config field out of range.
func New(store *eventstore.Store, topic Topic, publisherName string, pub Publisher, cfg *Config) (*Relay, error) {
	if store == nil || pub == nil {
		return nil, errors.New("pgdcb: outbox.New: nil store or publisher")
	}
	if !nameRE.MatchString(topic.Name) {
		return nil, fmt.Errorf("%w: topic name %s must be 1..64 characters of [a-z0-9_-]", ErrInvalidTopic, clip.Quote(topic.Name))
	}
	if !nameRE.MatchString(publisherName) {
		return nil, fmt.Errorf("%w: publisher name %s must be 1..64 characters of [a-z0-9_-]", ErrInvalidTopic, clip.Quote(publisherName))
	}
	if topic.Query.IsEmpty() {
		return nil, fmt.Errorf("%w: topic %q has an empty query", ErrInvalidTopic, topic.Name)
	}
	if err := topic.Query.Validate(); err != nil {
		return nil, fmt.Errorf("%w: topic %q: %w", ErrInvalidTopic, topic.Name, err)
	}
	if err := cfg.validate(); err != nil {
		return nil, errfmt.Errorf("pgdcb: outbox.New: %w", err)
	}
	c := cfg.withDefaults()
	r := &Relay{store: store, topic: topic, name: CheckpointName(topic.Name, publisherName), pub: pub, tracer: c.DeliveryTracer}
	r.delivery.stallAfter = c.StallAfter
	prefix := store.Schema() + "-"
	handler := func(ctx context.Context, tx pgx.Tx, evs []pgdcb.StoredEvent) error {
		msgs := make([]Message, len(evs))
		for i, ev := range evs {
			msgs[i] = Message{ID: prefix + strconv.FormatInt(ev.Position, 10), Topic: topic.Name, Event: ev}
		}
		ctx, cancel := context.WithTimeout(relayterm.With(ctx, r.termOf(tx)), c.PublishTimeout)
		defer cancel()
		start := time.Now()
		r.delivery.begin(start)
		if r.tracer != nil {
			ctx = r.tracer.TraceDeliveryStart(ctx, TraceDeliveryData{Relay: r.name, Topic: topic.Name, Messages: len(msgs)})
		}
		err := pub.Publish(ctx, msgs)
		if r.tracer != nil {
			r.tracer.TraceDeliveryEnd(ctx, TraceDeliveryData{Relay: r.name, Topic: topic.Name, Messages: len(msgs),
				Duration: time.Since(start), Err: err})
		}
		if err != nil {
			return errfmt.Errorf("pgdcb: outbox %q: publish: %w", r.name, err)
		}
		r.delivery.acked(time.Now())
		return nil
	}
	runner, err := projection.New(store, r.name, topic.Query, handler,
		&projection.Config{BatchSize: c.BatchSize, ReaderConfig: c.ReaderConfig, Logical: c.Logical})
	if err != nil {
		return nil, err
	}
	r.runner = runner
	return r, nil
}

// Name is the relay's checkpoint name (CheckpointName).
func (r *Relay) Name() string { return r.name }

// termOf returns the leadership term of a batch in tx.
func (r *Relay) termOf(tx pgx.Tx) uint64 {
	r.termMu.Lock()
	defer r.termMu.Unlock()
	if c := tx.Conn(); c != r.termConn || r.term == 0 {
		r.termConn, r.term = c, relayterm.New()
	}
	return r.term
}

// Run delivers until ctx ends (standing by while another relay of the same
// topic and publisher leads); it returns ctx's error.
func (r *Relay) Run(ctx context.Context) error {
	if rt, ok := r.tracer.(RelayTracer); ok {
		rt.TraceRelayStart(r)
		defer rt.TraceRelayEnd(r)
	}
	defer r.delivery.idle()
	return r.runner.Run(ctx)
}

// IsLeader reports whether this relay delivers right now.
func (r *Relay) IsLeader() bool { return r.runner.IsLeader() }

// Pause stops delivery (in every process) until Resume.
func (r *Relay) Pause(ctx context.Context) error { return r.runner.Pause(ctx) }

// Resume makes a PAUSED or FAILED relay deliver again from its checkpoint.
func (r *Relay) Resume(ctx context.Context) error { return r.runner.Resume(ctx) }

// Reset rewinds the relay to the start of the log: every event of the topic is
// delivered again, except, through a jspublisher.Publisher, those its stream
// still holds (reconciliation); other deduplicating brokers drop those still
// inside their duplicates window.
func (r *Relay) Reset(ctx context.Context) error { return r.runner.Reset(ctx) }
