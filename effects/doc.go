// Package effects executes side effects recorded as events: a per-effect
// queue on the event store, with leases, retries, poison effects and FIFO
// order per session (docs/EFFECTS.md).
//
// Request an effect with Queue.Request on effects.New(store, cfg); execute
// effects with effects.NewWorker(store, cfg), whose Config.Handlers maps an
// effect type to its handler, and Worker.Run(ctx).
//
// An effect is requested once per dedupe key ([Queue.Request]): an
// effect_requested event appended with an AppendIf whose idempotency query is
// "an event tagged effect_dedupe=<key>", so the same effect is never created
// twice. Workers ([NewWorker], [Worker.Run]) claim an effect by appending
// effect_started with an AppendIf conditioned on the session's events since
// their read, so two workers never both hold it; the claim carries a lease,
// extended (effect_lease_extended) while the handler runs.
// The registered [Handler] runs; success appends effect_completed, an error
// appends effect_failed and the effect is retried with capped exponential
// backoff until Config.MaxAttempts, after which it is failed for good (a
// poison effect). Completion and failure are appended only if nothing
// happened to the effect since the worker's read, so an effect is completed
// at most once even when its lease expired and another worker took it over.
//
// Every effect event is tagged effect_id=<id> and effect_session=<session>;
// an effect's state is the fold of its events ([Queue.Effect]). Within a
// session an effect starts only after the previous one finished (completed
// or failed for good); sessions run in parallel.
//
// Handlers run at least once; an effect's completion is recorded exactly
// once. A handler runs a second time only when a lease expired (its worker
// died or could not extend it); handlers with external side effects should be
// idempotent on the effect's ID.
//
// Stopping: [Worker.Run] is the worker's lifecycle. Cancel its context: Run
// returns once the handler in progress has returned (its context is
// cancelled with Run's) and every goroutine it started (the lease keeper's,
// its LISTEN connection's) has ended; no handler runs after Run returned.
// Then call the store's Close (it waits for the store's own background
// work), then close the pool.
package effects
