-- The checkpoint of a projection fed by logical decoding (package logical,
-- docs/SUBSCRIPTIONS.md "Logical decoding mode"): where its replication slot's
-- stream resumes, written in the batch's transaction with the read model.
-- NULL: the projection reads the tail (the default) or starts its logical
-- stream from scratch (a new slot and a snapshot read of the log). Text, in
-- the form logical.Checkpoint.String gives; opaque to SQL.
ALTER TABLE {{schema}}.checkpoints ADD COLUMN logical_checkpoint text;
