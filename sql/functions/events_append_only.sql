-- events_append_only: the trigger function that keeps events append-only,
-- and the two triggers that call it (created with it: a trigger needs its
-- function). One source, applied by sql.Migrate whenever this file's
-- rendered text changes (docs/SCHEMA.md).
--
-- Append-only, against the application's role (docs/SECURITY.md).
--
-- The application's role can never change or remove an event:
--   * the trigger lets a DELETE or the rebase UPDATE through only when the
--     statement runs as the owner of the events table (current_user inside
--     the SECURITY DEFINER functions delete_events_tagged and
--     rebase_transaction_ids, which the migrating role owns)
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
-- (the owner only inside the retention and rebase functions).
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

CREATE OR REPLACE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON {{schema}}.events
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.events_append_only();
CREATE OR REPLACE TRIGGER events_no_truncate BEFORE TRUNCATE ON {{schema}}.events
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.events_append_only();

REVOKE ALL ON FUNCTION {{schema}}.events_append_only FROM PUBLIC;
