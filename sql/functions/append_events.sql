-- append_events: the whole append (key locks, idempotency check, condition
-- check, insert) in one server call, one round trip. Its misuse checks, key
-- locks, item checks and settings are text it shares with append_group
-- (_append.sql). Called only by package eventstore, which computes the lock
-- keys; docs/CONCURRENCY.md says why each step is where it is. It runs as its owner (SECURITY DEFINER, with a fixed
-- search_path), so an application role appends with EXECUTE on it and no
-- privilege on events but SELECT (sql.Grant; docs/SECURITY.md).
--
-- Server CPU per call (user time of the backend from log_statement_stats,
-- pgbench, one event with one tag, synchronous_commit off, 3000 calls, two
-- runs): INSERT into an unindexed table 50-66 us; the same INSERT into events
-- with its indexes 82-85 us; an earlier form of this function (a jsonb query
-- decoded into records, the check in a nested PL/pgSQL call planned at every
-- call) 155-187 us unconditional and 248-268 us with a one-tag check without
-- cursor; this form 113-128 us and 138-161 us. Here:
--   * the queries come as arrays (one entry per item, its types and tags
--     flattened), not jsonb;
--   * the check runs inline, in a function that carries SET enable_seqscan =
--     off itself (the insert below has no use for a sequential scan either);
--   * a check without a cursor (every idempotency check, and "fail if any event
--     matches") of an item with tags only, types only or neither is a cached
--     statement, not planned per call: such a shape has one index path
--     (events_tags, events_type_log_order, any row). An item with both tags
--     and types, and a check against an old cursor (more than 1000 events
--     ago), are still planned per call, where the real values decide;
--   * cached statements always use their generic plan (see the SET below);
--   * a key lock is an assignment, not a PERFORM statement;
--   * a batch of one event is inserted with a plain VALUES row.
-- Events are passed column-wise: tags of event i are
-- p_tags[s(i-1)+1 : s(i)] where s(i) is the running sum of p_tag_counts.
--
-- Checks are passed as items, one entry per item in each p_item_* array:
-- p_item_idem[i] says whether item i belongs to the idempotency query (checked
-- against the whole log, first) or to the condition (checked against the
-- decision's cursor, after). Its types are the next p_item_type_counts[i]
-- entries of p_item_types, its tags the next p_item_tag_counts[i] entries of
-- p_item_tags; a count of 0 means "any". Items of one query are OR-ed, an
-- item's types OR-ed, its tags AND-ed. Idempotency items come before condition
-- items.
--
-- The decision's cursor is (p_after_tx, p_after_pos, p_after_snap) and the
-- recorded time of its event, p_after_at (NULL when the cursor carries none;
-- the default, so that a call without it, as before it existed, still runs).
--
-- status is 'ok', 'idempotent' or 'condition'; conflict_position names the
-- matching event when the append did not happen; occurred_at is the events'
-- recorded time (now(), their column's default) when they were appended. Misuse raises PD001 (isolation
-- level), PD002 (not the transaction's first write) or PD004 (lock keys not
-- strictly ascending).
-- The form before p_after_at and occurred_at (a new argument or result needs
-- a new function).
DROP FUNCTION IF EXISTS {{schema}}.append_events(text[], integer[], text[], jsonb[], jsonb[], uuid[],
    bigint[], boolean[], boolean[], integer[], text[], integer[], text[], xid8, bigint, pg_snapshot);

CREATE OR REPLACE FUNCTION {{schema}}.append_events(
{{include "event_args" . | indent 4}}
{{include "item_args" . | indent 4}}
    p_after_tx         xid8,
    p_after_pos        bigint,
    p_after_snap       pg_snapshot,
    p_after_at         timestamptz DEFAULT NULL,
    OUT status            text,
    OUT tx                xid8,
    OUT positions         bigint[],
    OUT conflict_position bigint,
    OUT occurred_at       timestamptz)
{{include "append_settings" . }}
AS $$
DECLARE
    i         integer;
    v_ti      integer := 0;  -- item types consumed
    v_gi      integer := 0;  -- item tags consumed
{{include "check_vars" . | indent 4}}
BEGIN
{{include "misuse_checks" . | indent 4}}

    -- 1. Key locks: shared for every appended event's type and tags and the
    -- global key, exclusive for the checks' keys.
{{include "lock_keys" . | indent 4}}

    -- 2 and 3. The checks, each its own statement after the locks, so each
    -- reads a snapshot taken after every append it waited for had committed
    -- (READ COMMITTED, VOLATILE function). Idempotency items come first: a
    -- retry of an append that committed must read as "already applied", not as
    -- a conflict with its own events.
    --
    -- A condition item fails on a matching event the decision did not see:
    -- (transaction_id, position) after the cursor, or written by a transaction
    -- in progress at the decision's snapshot (its xip list). A committed
    -- transaction not visible in that snapshot is one of the two: one that
    -- started after it has an id >= xmax, which sorts after the cursor (the
    -- cursor is at or before the last visible event). Both are ranges of
    -- events_log_order. Without a cursor, and for idempotency, any match counts.
    IF coalesce(array_length(p_item_idem, 1), 0) > 0 THEN
        v_cursor := (p_after_tx, p_after_pos) > ('0'::xid8, 0::bigint) OR p_after_snap IS NOT NULL;
        IF v_cursor THEN
{{include "cursor" (args "Snap" "p_after_snap" "Tx" "p_after_tx" "Pos" "p_after_pos" "At" "p_after_at") | indent 12}}
        END IF;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_item_idem, 1), 0) LOOP
{{include "item_entries" . | indent 8}}

{{include "item_check" (args "Tx" "p_after_tx" "Pos" "p_after_pos") | indent 8}}

        IF v_pos IS NOT NULL THEN
            status := CASE WHEN p_item_idem[i] THEN 'idempotent' ELSE 'condition' END;
            conflict_position := v_pos;
            RETURN;
        END IF;
    END LOOP;

    -- 4. Insert in batch order (positions ascend with the batch index).
    IF array_length(p_types, 1) = 1 THEN
        INSERT INTO {{schema}}.events (type, tags, data, metadata, event_id)
        VALUES (p_types[1], coalesce(p_tags, '{}'), p_data[1], p_metadata[1], p_event_ids[1])
        RETURNING ARRAY[position] INTO positions;
    ELSE
{{include "insert_events" (args "Counts" "p_tag_counts" "Series" "generate_subscripts(p_types, 1)" "Types" "p_types" "Tags" "p_tags" "Off" "" "Into" "positions") | indent 8}}
    END IF;

    tx := pg_current_xact_id();
    occurred_at := now();
    status := 'ok';
    -- No NOTIFY here: a notifying transaction holds a database-wide lock
    -- through its commit (and WAL flush), which serialised 8 writers to 0.17x of
    -- the INSERT floor. The Go side notifies after commit, coalesced.
END $$;

-- Functions are EXECUTE-able by PUBLIC by default; sql.Grant grants it to the
-- application role.
REVOKE ALL ON FUNCTION {{schema}}.append_events FROM PUBLIC;
