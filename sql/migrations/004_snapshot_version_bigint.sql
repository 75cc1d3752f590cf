-- Decision-snapshot model versions are Go ints (Model.WithSnapshots,
-- Snapshottable.SnapshotKey), stored whole: 004 made the column integer and
-- the store wrote int32(version), so a version of 2^31 or more was truncated
-- (2^32+1 stored as 1: another model's fold started from its snapshot) and a
-- timestamp-style version such as 202611251200 never found its own rows.
-- Snapshots are a cache; the rewrite keeps every row.
ALTER TABLE {{schema}}.decision_snapshots ALTER COLUMN version TYPE bigint;
