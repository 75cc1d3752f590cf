-- Retention (owner only; runs as the owner, whose statements alone the
-- append-only trigger lets through): deletes every event carrying the tag
-- (for example a whole run) and returns how many were deleted. It also drops
-- every decision snapshot, since any of them may cover a deleted event, and
-- bumps the snapshot epoch. It first locks decision_snapshots against
-- writers: a snapshot write in progress finishes first (and is then deleted
-- here); one that starts later waits for this transaction and then sees the
-- new epoch, so it writes nothing.
CREATE OR REPLACE FUNCTION {{schema}}.delete_events_tagged(p_tag text) RETURNS bigint
{{include "owner_settings" .}}
AS $$
DECLARE
    n bigint;
BEGIN
    LOCK TABLE {{schema}}.decision_snapshots IN SHARE ROW EXCLUSIVE MODE;
    PERFORM set_config('pgdcb.allow_delete', 'on', true);
    -- events_tags (GIN) finds the rows.
    DELETE FROM {{schema}}.events WHERE tags @> ARRAY[p_tag];
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('pgdcb.allow_delete', 'off', true);
    IF n > 0 THEN
        UPDATE {{schema}}.decision_snapshot_epoch SET epoch = epoch + 1;
        DELETE FROM {{schema}}.decision_snapshots;
    END IF;
    RETURN n;
END $$;

-- The owner's: no EXECUTE for PUBLIC (sql.Grant does not grant it).
REVOKE ALL ON FUNCTION {{schema}}.delete_events_tagged FROM PUBLIC;
