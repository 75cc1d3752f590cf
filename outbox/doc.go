// Package outbox delivers the events of a topic (a query) to an external
// system — at least once, in log order — through a Publisher, and advances
// its checkpoint only after the broker acknowledged.
//
// A Relay is a projection (package projection) whose handler publishes: it
// inherits leader election (one relay per topic and publisher delivers at a
// time), the tailing read that never skips a late-committing event, and the
// delivery bookkeeping in the checkpoints table — attempts (error count), last
// error, capped exponential backoff, FAILED after MaxAttempts, heartbeat —
// visible through Status.
//
// Every message carries a stable id, "<schema>-<position>", so a broker that
// deduplicates (NATS JetStream's Nats-Msg-Id, within the stream's duplicates
// window) drops what a retry or a restarted relay delivers again.
package outbox
