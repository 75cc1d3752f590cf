-- runstore: the snapshot projector reads only run events, and runs whose
-- snapshot is being resynchronised are marked STALE (package runstore,
-- docs/RUNSTORE.md).
--
-- The projector tails the log in (transaction_id, position) order. Through
-- events_log_order it would read every event of the schema, run event or not,
-- so other traffic in the same schema added work and lag. This partial index
-- holds the run events alone (the marker predicate of migration 005): the
-- projector's tail, its pass beyond a held horizon and the lag measurement
-- are range scans of it and never touch another event.
CREATE INDEX events_runstore_log_order ON {{schema}}.events (transaction_id, position)
    WHERE metadata @> '{"runstore": "v1"}';

-- A run whose projection observed its events out of contiguity (a gap, or a
-- gap filled later) or fell more than Config.ResyncLag behind is STALE from
-- stale_since until its snapshot is rebuilt from its events (contract §4.2,
-- §5.2). NULL: the snapshot is current.
ALTER TABLE {{schema}}.run_snapshots
    ADD COLUMN stale_since  timestamptz,
    ADD COLUMN stale_reason text;
CREATE INDEX run_snapshots_stale ON {{schema}}.run_snapshots (stale_since) WHERE stale_since IS NOT NULL;
