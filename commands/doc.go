// Package commands runs DCB command handlers: decide from state read in a
// transaction, append the decided events under the decision's condition, and
// record the command in the store's commands table in the same transaction.
//
// Make an Executor with commands.New(store, nil) and run a Command with
// Execute(ctx, cmd): it retries the decision when another append changed
// what it read.
//
// One execution attempt is:
//
//	BEGIN (READ COMMITTED)
//	  Decide: the handler reads (DecideContext.Project, ReadAll, ReadLast) and
//	          returns events + the append condition. No writes before the append.
//	  AppendIfTx: the first write of the transaction.
//	  INSERT INTO commands (command_id, type, data, metadata)  -- transaction_id defaults to the xid
//	COMMIT
//
// When the append fails with pgdcb.ErrConditionFailed (somebody changed what the
// decision read), the executor rolls back, waits a capped, jittered backoff and
// decides again, up to Config.MaxAttempts; the final error is an
// *AttemptsExhaustedError that says how many attempts were made and matches
// pgdcb.ErrConditionFailed. An error returned by the handler itself is a
// business rejection and is never retried.
//
// Idempotency: every command has an id (the caller's, or a fresh UUIDv7). Each
// event the command appends is tagged command_id=<id>, and the append carries
// the idempotency query "any event tagged command_id=<id>" (checked under an
// exclusive key lock by the store). Running the same id again, also
// concurrently, appends nothing and returns the first execution's Outcome with
// Duplicate set. The UNIQUE constraint on commands.command_id backs this up,
// which is what makes commands that decide zero events idempotent too: they are
// recorded (a commands row without events), not refused.
//
// New also takes any other pgdcb.Store, such as the in-memory store
// of package memstore for tests: an attempt is then Decide (reading straight
// from the store) and AppendIf, with the same tag, idempotency query,
// retries, errors and Duplicate outcomes, but no commands table (see New for
// the differences). Package commands/commandstest runs handlers as
// given-when-then scenarios on it.
package commands
