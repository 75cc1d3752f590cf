package projection

// LockKey exposes the leader election lock key to the tests.
var LockKey = lockKey

// PartitionSlot exposes the replication slot of a partition (logical mode)
// to the tests, which drop it.
var PartitionSlot = partitionSlot
