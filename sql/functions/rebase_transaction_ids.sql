-- Rebasing transaction ids after a restore into another cluster (see
-- sql.RebaseTransactionIDs and docs/LIFECYCLE.md, "Backups and restores").
--
-- The log's order is (transaction_id, position), and transaction_id is the
-- writer's xid8. A dump restored into a new cluster keeps the stored ids while
-- the new cluster counts its own from near zero: new events would sort before
-- old ones, tailing readers would skip them and decisions would misjudge
-- them. The rebase maps every stored id, in order, onto 3, 4, 5, … (below the
-- new cluster's counter, which the caller first advances past the number of
-- ids), in one transaction that holds the tables.
--
-- The append-only trigger lets that one UPDATE through: only inside
-- rebase_transaction_ids, which sets the transaction-local setting
-- pgdcb.allow_rebase for its own statements, and only when nothing but
-- transaction_id changes.
-- rebase_transaction_ids rewrites every stored transaction id (events,
-- commands, checkpoints; the checkpoints' '0' start stays) to its rank + 2,
-- keeping their order, and returns how many distinct ids it mapped. It refuses
-- (PD005) when the ranks would not all be below this transaction's own id:
-- advance the counter first (sql.RebaseTransactionIDs
-- does). Run it while no process appends or follows the log: a cursor or
-- checkpoint held in memory keeps the old ids.
-- Owner only.
CREATE OR REPLACE FUNCTION {{schema}}.rebase_transaction_ids() RETURNS bigint
{{include "owner_settings" .}}
AS $$
DECLARE
    n bigint;
BEGIN
    LOCK TABLE {{schema}}.events, {{schema}}.commands, {{schema}}.checkpoints IN EXCLUSIVE MODE;
    CREATE TEMP TABLE pgdcb_rebase_map ON COMMIT DROP AS
        SELECT tx AS old_tx, ((row_number() OVER (ORDER BY tx)) + 2)::text::xid8 AS new_tx
          FROM (SELECT transaction_id AS tx FROM {{schema}}.events
                UNION SELECT transaction_id FROM {{schema}}.commands
                UNION SELECT transaction_id FROM {{schema}}.checkpoints WHERE transaction_id <> '0') ids;
    SELECT count(*) INTO n FROM pg_temp.pgdcb_rebase_map;
    IF n + 2 >= pg_current_xact_id()::text::numeric THEN
        RAISE EXCEPTION 'pgdcb: % stored transaction ids do not fit below this cluster''s transaction counter (%): advance it first',
            n, pg_current_xact_id() USING ERRCODE = 'PD005';
    END IF;
    CREATE INDEX ON pg_temp.pgdcb_rebase_map (old_tx);
    ANALYZE pg_temp.pgdcb_rebase_map;
    PERFORM set_config('pgdcb.allow_rebase', 'on', true);
    UPDATE {{schema}}.events e SET transaction_id = m.new_tx
      FROM pg_temp.pgdcb_rebase_map m WHERE e.transaction_id = m.old_tx AND m.old_tx <> m.new_tx;
    PERFORM set_config('pgdcb.allow_rebase', 'off', true);
    UPDATE {{schema}}.commands c SET transaction_id = (m.new_tx::text::numeric + 4611686018427387904)::text::xid8
      FROM pg_temp.pgdcb_rebase_map m WHERE c.transaction_id = m.old_tx;
    UPDATE {{schema}}.commands SET transaction_id = (transaction_id::text::numeric - 4611686018427387904)::text::xid8
     WHERE transaction_id::text::numeric >= 4611686018427387904;
    UPDATE {{schema}}.checkpoints k SET transaction_id = m.new_tx
      FROM pg_temp.pgdcb_rebase_map m WHERE k.transaction_id = m.old_tx;
    RETURN n;
END $$;

-- The owner's: no EXECUTE for PUBLIC (sql.Grant does not grant it).
REVOKE ALL ON FUNCTION {{schema}}.rebase_transaction_ids FROM PUBLIC;
