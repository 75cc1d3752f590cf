package sql

// BurnTransactionIDs exposes burnTransactionIDs to the tests.
var BurnTransactionIDs = burnTransactionIDs
