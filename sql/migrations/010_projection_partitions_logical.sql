-- Partitioned projections in logical decoding mode (PartitionConfig.Logical,
-- docs/SUBSCRIPTIONS.md "Partitioned projections"): each partition streams
-- from a replication slot of its own, and this is where its stream resumes,
-- written in the partition's batch transaction with the read model, as
-- checkpoints.logical_checkpoint (migration 003) is for a projection. NULL:
-- the partition reads the tail, or starts its stream from scratch.
ALTER TABLE {{schema}}.projection_partitions ADD COLUMN logical_checkpoint text;
