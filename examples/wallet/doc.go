// Package wallet is the pgdcb reference application: wallets with deposits,
// withdrawals and transfers, written the way we want users to write theirs.
//
// Every wallet event is tagged wallet=<id>; a wallet's decision state is the
// fold of the events carrying its tag. A transfer is ONE decision over both
// wallets (two models projected in one read, one conditional append over the
// union of their tags): no saga, no aggregate lock, and it cannot overdraw the
// source even when many transfers race. Commands run through commands.Executor,
// which re-decides on conflicts and makes caller-supplied command ids
// idempotent.
//
// The HTTP API (NewAPI) returns a wallet's decision cursor as its ETag and
// accepts it back with If-Match: the command fails with 412 if anything about
// that wallet changed since. The Balances read model is a table maintained by
// tailing the log (eventstore.Store.ReadTail) with its checkpoint in the same
// transaction as the balances.
package wallet
