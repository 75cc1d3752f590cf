package pgdcbtest

import "testing"

// Token is the test binary's token (in every schema name it makes).
func Token(tb testing.TB) string { return theSchemas(tb).token }

// OwnerKey exposes ownerKey to the tests.
var OwnerKey = ownerKey

// Sweep runs the orphan sweep now, synchronously.
func Sweep(tb testing.TB) { theSchemas(tb).sweep() }
