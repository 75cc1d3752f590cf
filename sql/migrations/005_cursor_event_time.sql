-- The step of a server function change (sql/checksums.txt): append_events
-- and append_group take the recorded time of the decision cursor's event
-- (p_after_at: a cursor names one event of one history, docs/REPLICAS.md,
-- "Failover") and return the events' occurred_at. Their files in
-- sql/functions drop the old forms and create the new ones together, after
-- this step; run sql.Grant again after migrating. Nothing else changes.
SELECT 1;
