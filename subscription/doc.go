// Package subscription follows the event log: it reads the events matching a
// query from a cursor in batches (catch-up), then stays live, woken by the
// store's Listen (LISTEN/NOTIFY on the store's channel for PostgreSQL) with
// polling as the fallback.
//
// Make one with subscription.New(store, q, nil) and call Run(ctx, from,
// handler): the handler receives the matching events after from, batch by
// batch in log order, at least once; persist each Batch.Cursor and resume
// from it.
//
// A subscription takes a pgdcb.Store: the PostgreSQL store, or the
// in-memory store of package memstore in tests. Every read goes through its
// ReadTail; eventstore.Store.ReadTail stops at the horizon of the store's
// database: an event that commits late (a lower position in a transaction
// that was still running) is never skipped, and events come in the log's order
// (transaction_id, position). A long-running transaction of the store's
// database that holds an xid holds the horizon back (transactions of other
// databases do not); that delay, and who causes it, is in Lag (and a StatusTracer's TraceLag).
//
// With Config.Logical, RunLogical reads through logical decoding instead
// (package logical): events in commit order from a replication slot, which
// no open transaction holds back; it resumes from a logical.Checkpoint the
// handler stores with the batch's cursor.
//
// Package projection builds checkpointed, leader-elected projections on the
// same reader; package outbox builds publishers to external systems on those.
package subscription
