-- runstore: the State Store contract on the event log (package runstore,
-- docs/RUNSTORE.md). runstore's own migration line (runstore.Migrate,
-- recorded in runstore_migrations): a schema that does not use runstore
-- carries none of these indexes or tables. A run event is one row of {{schema}}.events tagged
-- run_id=…, step_id=…, idempotency_key=…, whose data holds the whole
-- CanonicalEngineEvent (runId, runSeq, …) and whose metadata carries the
-- marker {"runstore": "v1"}.
--
-- (runId, runSeq) is unique per the contract, and this index is how FetchEvents
-- reads a page (`data->>'runId' = $1 AND data->'runSeq' > $2 ORDER BY
-- data->'runSeq' LIMIT n`: one range scan, no sort) and how AppendEvent finds a
-- run's last runSeq (a backward scan, one row). The key is jsonb, not
-- ::bigint, so that an unrelated event whose data has a non-numeric runSeq can
-- never make an insert fail; jsonb numbers compare numerically. Partial: only
-- runstore events pay for it, and a query must repeat the marker predicate
-- literally for the planner to use it.
CREATE UNIQUE INDEX events_runstore_run_seq ON {{schema}}.events ((data->>'runId'), (data->'runSeq'))
    WHERE metadata @> '{"runstore": "v1"}';

-- The projector tails the log in (transaction_id, position) order. Through
-- events_log_order it would read every event of the schema, run event or not,
-- so other traffic in the same schema added work and lag. This partial index
-- holds the run events alone (the marker predicate above): the
-- projector's tail, its pass beyond a held horizon and the lag measurement
-- are range scans of it and never touch another event.
CREATE INDEX events_runstore_log_order ON {{schema}}.events (transaction_id, position)
    WHERE metadata @> '{"runstore": "v1"}';

-- The runstore's materialised run view.
CREATE TABLE {{schema}}.run_snapshots (
    run_id         text        PRIMARY KEY,
    status         text        NOT NULL,
    last_event_seq bigint      NOT NULL DEFAULT 0,
    snapshot_data  jsonb       NOT NULL DEFAULT '{}',
    started_at     timestamptz,
    completed_at   timestamptz,
    projected_at   timestamptz NOT NULL DEFAULT now(),
    version        bigint      NOT NULL DEFAULT 0,
    -- A run whose projection observed its events out of contiguity (a gap, or
    -- a gap filled later) or fell more than Config.ResyncLag behind is STALE
    -- from stale_since until its snapshot is rebuilt from its events
    -- (contract §4.2, §5.2). NULL: the snapshot is current.
    stale_since    timestamptz,
    stale_reason   text
);
CREATE INDEX run_snapshots_stale ON {{schema}}.run_snapshots (stale_since) WHERE stale_since IS NOT NULL;
