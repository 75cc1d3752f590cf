-- The step of a server function change (sql/checksums.txt): import_events,
-- new, restores exported events with their recorded time (occurred_at) for
-- eventstore.Store.ImportTx and `pgdcb import`. Owner only: sql.Grant does
-- not grant it. Its file in sql/functions creates it after this step.
-- Nothing else changes.
SELECT 1;
