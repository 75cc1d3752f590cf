-- import_events: restoring exported events with their recorded time
-- (eventstore.Store.ImportTx, `pgdcb import`; docs/LIFECYCLE.md, "Backups
-- and restores"). Owner only (sql.Grant does not grant it): an application
-- role cannot choose occurred_at.
--
-- It only INSERTs: the append-only trigger, the table's constraints and the
-- Go side's validation (the append's) hold as for append_events. What differs
-- from an append:
--   * occurred_at is the caller's (p_occurred_at[n]; NULL: now()). Positions
--     and transaction ids are still this log's;
--   * no checks: the caller passes the global key (p_lock_key), taken
--     EXCLUSIVE as an escalated append takes it, so every append and check
--     (each takes the global key, at least SHARED) waits for the import's
--     transaction and sees it whole. One key: no deadlock, whatever the
--     number of calls;
--   * it returns the transaction id, the positions and the last event's
--     recorded time;
--   * one transaction may import in several calls (a source transaction
--     larger than a batch): the first call must be the transaction's first
--     write, like an append (PD002), and records the transaction id in the
--     transaction-local setting pgdcb.import_xact; a later call of the same
--     transaction continues. Anything else writing first is refused.
CREATE OR REPLACE FUNCTION {{schema}}.import_events(
{{include "event_args" . | indent 4}}
    p_occurred_at      timestamptz[],
    p_lock_key         bigint,
    OUT tx             xid8,
    OUT positions      bigint[],
    OUT occurred_at    timestamptz)
{{include "owner_settings" .}}
AS $$
BEGIN
    IF current_setting('pgdcb.import_xact', true) IS DISTINCT FROM pg_current_xact_id_if_assigned()::text THEN
{{include "misuse_checks" . | indent 8}}
    END IF;
    PERFORM pg_advisory_xact_lock(p_lock_key);
    -- In batch order (positions ascend with the batch index).
    WITH src AS (
        SELECT n, sum(p_tag_counts[n]) OVER (ORDER BY n) AS tag_end
          FROM generate_subscripts(p_types, 1) AS n
    ), ins AS (
        INSERT INTO {{schema}}.events (type, tags, data, metadata, event_id, occurred_at)
        SELECT p_types[n],
               coalesce(p_tags[tag_end - p_tag_counts[n] + 1 : tag_end], '{}'),
               p_data[n], p_metadata[n], p_event_ids[n], coalesce(p_occurred_at[n], now())
          FROM src
         ORDER BY n
        RETURNING position
    )
    SELECT array_agg(ins.position ORDER BY ins.position) INTO positions FROM ins;
    tx := pg_current_xact_id();
    occurred_at := coalesce(p_occurred_at[cardinality(p_types)], now());
    PERFORM set_config('pgdcb.import_xact', tx::text, true);
END $$;

-- The owner's: no EXECUTE for PUBLIC (sql.Grant does not grant it).
REVOKE ALL ON FUNCTION {{schema}}.import_events FROM PUBLIC;
