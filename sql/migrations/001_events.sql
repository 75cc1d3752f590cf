-- pgdcb core schema: the event log and its companions. {{schema}} is replaced by the quoted schema name; no
-- statement relies on search_path.

-- The event log. position orders events inside a transaction; the log's canonical
-- order is (transaction_id, position). transaction_id is the writing transaction's
-- xid8, so a reader can tell which events belong to transactions that are still
-- running (docs/CONCURRENCY.md: tailing reads stop at the horizon).
CREATE TABLE {{schema}}.events (
    position       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transaction_id xid8        NOT NULL DEFAULT pg_current_xact_id(),
    type           text        NOT NULL CONSTRAINT events_type_length CHECK (length(type) BETWEEN 1 AND 64),
    tags           text[]      NOT NULL,
    -- jsonb, not json: refused on the way in when invalid, and queryable by
    -- users (containment, indexes). Measured with pgbench, 1 client, a 150-byte
    -- payload, autocommit single-row INSERT: 0.276 ms jsonb vs 0.267 ms json
    -- (3 runs each): about 3% of the plain INSERT.
    data           jsonb       NOT NULL,
    metadata       jsonb,
    event_id       uuid,
    occurred_at    timestamptz NOT NULL DEFAULT now()
);

-- (b) Log order and tailing reads: `transaction_id < horizon AND
-- (transaction_id, position) > cursor ORDER BY transaction_id, position` is a
-- range scan of this index; the condition check bounds its rows by
-- `transaction_id >= xmin of the decision's snapshot` with it too, and Head
-- reads its last entry.
CREATE INDEX events_log_order ON {{schema}}.events (transaction_id, position);

-- (a) Tag queries (`tags @> ARRAY[...]`), for reads and conflict checks. The
-- pending list (fastupdate) is off: every lookup would scan it, which halved the
-- speed of a conditional append in the prototype.
CREATE INDEX events_tags ON {{schema}}.events USING gin (tags) WITH (fastupdate = off);

-- (a) Type-only query items, in log order per type (a type-only query streamed in
-- full needs no sort for one type).
CREATE INDEX events_type_log_order ON {{schema}}.events (type, transaction_id, position);

-- (c) Client-chosen event ids, for idempotent retries.
CREATE UNIQUE INDEX events_event_id ON {{schema}}.events (event_id) WHERE event_id IS NOT NULL;

-- Append-only, against the application's role (docs/SECURITY.md).
--
-- The application's role can never change or remove an event:
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

CREATE FUNCTION {{schema}}.events_append_only() RETURNS trigger
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

CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON {{schema}}.events
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.events_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON {{schema}}.events
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.events_append_only();

REVOKE ALL ON FUNCTION {{schema}}.events_append_only FROM PUBLIC;

-- The command that produced a transaction's events (written by the command
-- executor in the same transaction as the events).
CREATE TABLE {{schema}}.commands (
    transaction_id xid8        PRIMARY KEY DEFAULT pg_current_xact_id(),
    command_id     uuid        UNIQUE,
    type           text        NOT NULL CHECK (length(type) BETWEEN 1 AND 64),
    data           jsonb       NOT NULL,
    metadata       jsonb,
    occurred_at    timestamptz NOT NULL DEFAULT now()
);

-- One row per projection, subscription or outbox publisher.
CREATE TABLE {{schema}}.checkpoints (
    name           text        PRIMARY KEY,
    transaction_id xid8        NOT NULL DEFAULT '0',
    position       bigint      NOT NULL DEFAULT 0,
    status         text        NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'PAUSED', 'FAILED')),
    error_count    integer     NOT NULL DEFAULT 0,
    last_error     text,
    leader         text,
    heartbeat_at   timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
