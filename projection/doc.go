// Package projection runs named, checkpointed projections: a handler receives
// each batch of events together with a pgx.Tx, and the read-model writes and
// the checkpoint move commit in that one transaction, so a PostgreSQL read
// model is updated exactly once per event.
//
// Make a Runner with projection.New(store, "balances", q, handler, nil)
// and call Run(ctx) in a goroutine; WaitFor(ctx, cursor) returns once the
// read model holds the events up to an append's cursor.
//
// Only one process runs a given projection at a time: a Runner becomes leader
// by taking a session advisory lock on a connection it holds for as long as it
// leads, and runs every batch on that same connection, so a leader whose
// connection died cannot commit anything (the lock went with the connection).
// Standby runners retry the lock every ElectionInterval and take over. The
// checkpoint update is also a compare-and-set on the row, so a batch that
// raced a Pause, Reset or another leader rolls back instead of committing.
//
// On a store that reads a hot standby (eventstore.Config.ReadPool), each
// batch's page is read there; the checkpoint read, the handler and the
// checkpoint's compare-and-set stay in the batch's transaction on the
// primary (docs/REPLICAS.md). A BatchHandler that must act before the read
// implements BeforeReader.
//
// A projection's state lives in the store's checkpoints table: ACTIVE,
// PAUSED or FAILED, with an error count and the last error; Pause, Resume,
// Reset and Status manage it from any process.
//
// Stopping: [Runner.Run] is the runner's lifecycle. Cancel its context: Run
// returns once the batch in progress has ended (the handler's context is
// cancelled with it; the batch rolls back unless it committed first) and
// every goroutine it started (its LISTEN connection's) has ended; no
// handler runs after Run returned. Then call the store's Close, then close
// the pool.
package projection
