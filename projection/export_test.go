package projection

// LockKey exposes the leader election lock key to the tests.
var LockKey = lockKey
