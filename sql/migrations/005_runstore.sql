-- runstore: the State Store contract on the event log (package runstore,
-- docs/RUNSTORE.md). A run event is one row of {{schema}}.events tagged
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
