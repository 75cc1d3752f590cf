// Package outbox delivers the events of a topic (a query) to an external
// system — in log order — through a Publisher, and advances its checkpoint
// only after the broker acknowledged.
//
// Make a Relay with outbox.New(store, topic, "nats", publisher, nil), the
// publisher usually NATS JetStream's (jspublisher.New, in the module
// github.com/pgdcb/pgdcb/outbox/jspublisher), and call Run(ctx) in a
// goroutine.
//
// A Relay is a projection (package projection) whose handler publishes: it
// inherits leader election (one relay per topic and publisher delivers at a
// time), the tailing read that never skips a late-committing event, and the
// delivery bookkeeping in the checkpoints table — attempts (error count), last
// error, capped exponential backoff, FAILED after MaxAttempts, heartbeat —
// visible through Status, which adds what this process saw of the broker:
// the last ack, since when a publish has been waiting, and whether delivery
// is stalled (also as gauges: pgdcbprom.New).
//
// Every message carries a stable id, "<schema>-<position>", so a broker that
// deduplicates (NATS JetStream's Nats-Msg-Id, within the stream's duplicates
// window) drops what a retry or a restarted relay delivers again. The
// JetStream publisher, a module of its own so that only its importers
// download the NATS client, also reconciles with the stream, so
// redeliveries do not reach the stream however long after the window they
// come.
//
// docs/OUTBOX.md describes the delivery guarantee, reconciliation and what an
// operator watches.
//
// Stopping: [Relay.Run] is the relay's lifecycle. Cancel its context: Run
// returns once the Publish in progress has returned (its context is
// cancelled with Run's; the checkpoint stays where the last acknowledged
// batch left it) and every goroutine it started has ended; nothing is
// published after Run returned. Then call the store's Close, then close the
// pool and the broker connection.
package outbox
