-- Snapshots of decision models (eventstore/snapshot.go, docs/SNAPSHOTS.md).
--
-- One row per (model name, model version, query): the model's state folded
-- over every event matching the query up to and including the event at
-- (transaction_id, position), a point below the horizon of the read that
-- folded it (every transaction at or before it had ended), so no event can
-- ever appear at or before it. A snapshot is only a cache: dropping any row,
-- or all of them, is always safe.
CREATE TABLE {{schema}}.decision_snapshots (
    name           text   NOT NULL,
    version        integer NOT NULL,
    -- sha256 of the canonical form of the model's query (query_text).
    query_key      bytea  NOT NULL,
    query_text     text   NOT NULL,
    transaction_id xid8   NOT NULL,
    position       bigint NOT NULL,
    state          bytea  NOT NULL,
    -- The retention epoch the folding read ran in (decision_snapshot_epoch).
    epoch          bigint NOT NULL,
    saved_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, query_key, version)
);

-- Bumped by retention. A snapshot is written only if the epoch is still the
-- one its folding read saw, so a read from before a retention can never
-- store events the retention deleted.
CREATE TABLE {{schema}}.decision_snapshot_epoch (
    id    boolean PRIMARY KEY DEFAULT true CHECK (id),
    epoch bigint  NOT NULL
);
INSERT INTO {{schema}}.decision_snapshot_epoch (epoch) VALUES (0);

-- Retention (migration 8's function) now also drops every decision snapshot,
-- since any of them may cover a deleted event, and bumps the epoch. It first
-- locks decision_snapshots against writers: a snapshot write in progress
-- finishes first (and is then deleted here); one that starts later waits for
-- this transaction and then sees the new epoch, so it writes nothing.
CREATE OR REPLACE FUNCTION {{schema}}.delete_events_tagged(p_tag text) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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
REVOKE ALL ON FUNCTION {{schema}}.delete_events_tagged FROM PUBLIC;
