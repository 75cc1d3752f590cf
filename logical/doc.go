// Package logical feeds tailing readers from logical decoding instead of tail
// reads: a publication on the store's events table, one replication slot per
// reader, and the pgoutput stream decoded into pgdcb.StoredEvent. Events
// arrive in COMMIT order, so a transaction left open in the same database (the
// application's own long job, an idle-in-transaction session) no longer holds
// the reader back, as it holds the default tail read's horizon.
//
// It is opt-in: set projection.Config.Logical, or subscription.Config.Logical
// and run the subscription with RunLogical. The server needs
// wal_level=logical, a free replication slot (max_replication_slots) and WAL
// sender (max_wal_senders), and a role with the REPLICATION attribute that may
// create a publication on the events table (docs/SUBSCRIPTIONS.md "Logical
// decoding mode").
//
// Order and checkpoint: events come in the order their transactions committed,
// each transaction's events in position order. That is not the log's
// (transaction_id, position) order: a transaction with a lower id can commit,
// and be delivered, after one with a higher id. The reader's checkpoint is
// therefore a Checkpoint (the commit LSN of a transaction and how many of its
// events were consumed), not a cursor. The cursor a reader hands out (Batch.Tail)
// is a point in log order before which every event was delivered: it is safe as
// an AppendIf After, and it never passes a transaction that is still open.
package logical
