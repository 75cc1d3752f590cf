-- Roles: append-only against the application's role (docs/SECURITY.md).
--
-- Until this step the append-only trigger let a DELETE (or the rebase UPDATE)
-- through whenever the session had set pgdcb.allow_delete (pgdcb.allow_rebase)
-- to 'on', and delete_events_tagged and rebase_transaction_ids were
-- EXECUTE-able by PUBLIC: any role that could write to events could delete
-- events, and remove one event of a run with delete_events_tagged.
--
-- From here:
--   * the trigger lets a DELETE or the rebase UPDATE through only when the
--     statement runs as the owner of the events table (current_user inside
--     the SECURITY DEFINER functions below, which the migrating role owns)
--     AND the function's own transaction-local flag is set. A flag set by any
--     other role is ignored; TRUNCATE is always refused;
--   * delete_events_tagged and rebase_transaction_ids run as their owner
--     (SECURITY DEFINER) with a fixed search_path, and only roles the owner
--     grants may call them: none, by sql.Grant;
--   * append_events runs as its owner too, so an application role appends
--     without any INSERT privilege on events; sql.Grant gives it EXECUTE.
--
-- The trigger and the SECURITY DEFINER functions carry a fixed search_path
-- (pg_catalog first, pg_temp last) so that no object or operator a session
-- puts on its search_path can change what they do. An owner or a superuser
-- can always bypass the trigger (the owner can drop it): the guarantee holds
-- against every other role.

CREATE OR REPLACE FUNCTION {{schema}}.events_append_only() RETURNS trigger
LANGUAGE plpgsql
-- Not SECURITY DEFINER: current_user must be the role running the statement
-- (the owner only inside the functions below).
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (TG_OP = 'DELETE' AND current_setting('pgdcb.allow_delete', true) = 'on')
       OR (TG_OP = 'UPDATE' AND current_setting('pgdcb.allow_rebase', true) = 'on'
           AND (NEW.position, NEW.type, NEW.tags, NEW.data, NEW.metadata, NEW.event_id, NEW.occurred_at)
               IS NOT DISTINCT FROM
               (OLD.position, OLD.type, OLD.tags, OLD.data, OLD.metadata, OLD.event_id, OLD.occurred_at)) THEN
        -- The flag alone proves nothing (any role can set it): the statement
        -- must also run as the table's owner.
        IF current_user = (SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.oid = TG_RELID) THEN
            IF TG_OP = 'DELETE' THEN
                RETURN OLD;
            END IF;
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'pgdcb: events are append-only: % on %.% refused (retention runs as the schema owner through delete_events_tagged)',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'PD003';
END $$;

-- Retention: deletes every event carrying the tag (for example a whole run).
-- Returns how many were deleted. Owner only.
CREATE OR REPLACE FUNCTION {{schema}}.delete_events_tagged(p_tag text) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM set_config('pgdcb.allow_delete', 'on', true);
    -- events_tags (GIN) finds the rows.
    DELETE FROM {{schema}}.events WHERE tags @> ARRAY[p_tag];
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('pgdcb.allow_delete', 'off', true);
    RETURN n;
END $$;

-- The same as migration 7 (see its comments), as its owner, with the
-- temporary table named by its schema. Owner only.
CREATE OR REPLACE FUNCTION {{schema}}.rebase_transaction_ids() RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

-- append_events (migration 6) keeps its body and its SET clauses; it now runs
-- as its owner, so the application role needs EXECUTE on it and no privilege
-- on events but SELECT. Every name in it is schema-qualified or in pg_catalog.
ALTER FUNCTION {{schema}}.append_events SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Functions are EXECUTE-able by PUBLIC by default. sql.Grant grants EXECUTE
-- on append_events to the application role; the others are the owner's.
-- (The trigger fires whoever runs the statement: firing checks no EXECUTE.)
REVOKE ALL ON FUNCTION {{schema}}.append_events FROM PUBLIC;
REVOKE ALL ON FUNCTION {{schema}}.delete_events_tagged FROM PUBLIC;
REVOKE ALL ON FUNCTION {{schema}}.rebase_transaction_ids FROM PUBLIC;
REVOKE ALL ON FUNCTION {{schema}}.events_append_only FROM PUBLIC;
