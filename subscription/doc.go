// Package subscription follows the event log: it reads the events matching a
// query from a cursor in batches (catch-up), then stays live, woken by
// LISTEN/NOTIFY on the store's channel with polling as the fallback.
//
// Every read goes through eventstore.Store.ReadTail, which stops at the
// pg_snapshot_xmin horizon: an event that commits late (a lower position in a
// transaction that was still running) is never skipped, and events come in the
// log's order (transaction_id, position). A long-running transaction anywhere in
// the cluster holds the horizon back; that delay is exported in Metrics.
//
// Package projection builds checkpointed, leader-elected projections on the
// same reader; package outbox builds publishers to external systems on those.
package subscription
