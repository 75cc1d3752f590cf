package sql

// BurnTransactionIDs exposes burnTransactionIDs to the tests.
var BurnTransactionIDs = burnTransactionIDs

// AppFunctions and OwnerFunctions expose Grant's classification of the
// schema's functions to the tests.
var (
	AppFunctions   = appFunctions
	OwnerFunctions = ownerFunctions
)

// Functions exposes the rendered server functions to the tests.
var Functions = functions
