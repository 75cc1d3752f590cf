-- first_unseen_match: the position of one event matching the query (a jsonb
-- array of items {"types": [...]|null, "tags": [...]|null}) that a decision at
-- the cursor did not see, or NULL. Without a cursor (p_cursor false) any match
-- counts. "Not seen" is (transaction_id, position) > cursor OR transaction_id
-- in the decision snapshot's in-progress list (see docs/CONCURRENCY.md): both
-- are ranges of events_log_order, so with a cursor the check reads only rows
-- written since the decision.
--
-- For a decision that is not recent (or no cursor), each item's statement is
-- built for its shape and run with EXECUTE, so it is planned with its real
-- tags, types and bounds (a cached generic plan could
-- not estimate them, and picked a scan of everything since an old snapshot:
-- 41 ms per append with one old transaction open in the prototype). Plans, by
-- EXPLAIN at 1M events: a tag item uses events_tags (GIN) or, with a recent
-- cursor, a BitmapOr of the events_log_order ranges; a type-only item uses
-- events_type_log_order or the ranges; a match-all item the ranges.
--
-- enable_seqscan = off, for this function only: each statement is `… LIMIT 1`,
-- and a planner that estimates a tag as moderately common expects a match
-- within a few hundred rows of a sequential scan; when the tag is absent (the
-- usual case for a check that passes) the scan reads the whole table (10-30 ms
-- per append on a 20k-event log, measured). Every shape has an index path; the
-- setting only removes the trap.
CREATE FUNCTION {{schema}}.first_unseen_match(
    p_query     jsonb,
    p_cursor    boolean,
    p_after_tx  xid8,
    p_after_pos bigint,
    p_xip       xid8[])
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $$
DECLARE
    v_item   record;
    v_sql    text;
    v_pos    bigint;
    v_recent boolean;
BEGIN
    -- A recent decision (the usual case): few rows were written since the
    -- cursor. Positions follow log order closely, so the identity sequence
    -- tells how many. Then only the rows since the cursor are read, through
    -- events_log_order, by a statement whose tag and type tests cannot use an
    -- index (`IS TRUE`): its cached plan is the same whatever the tag, its
    -- size or the state of the statistics. (Left to the planner, a hot tag
    -- with stale statistics was read whole through events_tags at every
    -- append: 500 appends/s instead of 2000.)
    v_recent := p_cursor AND coalesce(pg_sequence_last_value('{{schema}}.events_position_seq'), 0) - p_after_pos <= 1000;
    FOR v_item IN SELECT * FROM jsonb_to_recordset(p_query) AS x(types text[], tags text[]) LOOP
        IF v_recent THEN
            SELECT e.position INTO v_pos FROM {{schema}}.events e
             WHERE ((e.transaction_id, e.position) > (p_after_tx, p_after_pos) OR e.transaction_id = ANY (p_xip))
               AND (v_item.tags IS NULL OR (e.tags @> v_item.tags) IS TRUE)
               AND (v_item.types IS NULL OR (e.type = ANY (v_item.types)) IS TRUE)
             LIMIT 1;
        ELSE
            -- Otherwise a statement built for the item's shape, planned with
            -- its real values.
            v_sql := 'SELECT e.position FROM {{schema}}.events e WHERE TRUE';
            IF v_item.tags IS NOT NULL THEN
                v_sql := v_sql || ' AND e.tags @> $1';
            END IF;
            IF v_item.types IS NOT NULL THEN
                v_sql := v_sql || ' AND e.type = ANY ($2)';
            END IF;
            IF p_cursor THEN
                v_sql := v_sql || ' AND ((e.transaction_id, e.position) > ($3, $4) OR e.transaction_id = ANY ($5))';
            END IF;
            EXECUTE v_sql || ' LIMIT 1' INTO v_pos
                USING v_item.tags, v_item.types, p_after_tx, p_after_pos, p_xip;
        END IF;
        IF v_pos IS NOT NULL THEN
            RETURN v_pos;
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

-- append_events: the whole append — key locks, idempotency check, condition
-- check, insert — in one server call (one round trip). Called only by package
-- eventstore, which computes the lock keys; see DESIGN.md §2 and
-- docs/CONCURRENCY.md for why each step is where it is.
--
-- Events are passed column-wise. Tags of event i are
-- p_tags[s(i-1)+1 : s(i)] where s(i) is the running sum of p_tag_counts.
-- A query (p_idem, p_cond) is a jsonb array of items {"types": [...]|null,
-- "tags": [...]|null}: items are OR-ed, an item's types OR-ed, its tags AND-ed.
--
-- status is 'ok', 'idempotent' or 'condition'; conflict_position names the
-- matching event when the append did not happen. Misuse raises PD001 (isolation
-- level), PD002 (not the transaction's first write) or PD004 (lock keys not
-- strictly ascending).
CREATE FUNCTION {{schema}}.append_events(
    p_types      text[],
    p_tag_counts integer[],
    p_tags       text[],
    p_data       jsonb[],
    p_metadata   jsonb[],
    p_event_ids  uuid[],
    p_lock_keys  bigint[],
    p_lock_excl  boolean[],
    p_idem       jsonb,
    p_cond       jsonb,
    p_after_tx   xid8,
    p_after_pos  bigint,
    p_after_snap pg_snapshot,
    OUT status            text,
    OUT tx                xid8,
    OUT positions         bigint[],
    OUT conflict_position bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    i      integer;
BEGIN
    -- Under REPEATABLE READ / SERIALIZABLE the checks below would read the
    -- snapshot taken before the lock wait and let a conflicting commit through.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgdcb: append needs READ COMMITTED isolation, this transaction is %',
            upper(current_setting('transaction_isolation')) USING ERRCODE = 'PD001';
    END IF;
    -- A transaction that already has an xid would give the events a
    -- transaction_id older than events they depend on (causal inversion in log
    -- order), and a second append in it could deadlock.
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'pgdcb: append must be the first write of its transaction, and only one append per transaction (this transaction already wrote)'
            USING ERRCODE = 'PD002';
    END IF;

    -- 1. Key locks: shared for every appended event's type and tags and the
    -- global key, exclusive for the checks' keys. One key per entry, strongest
    -- mode, strictly ascending, taken one statement after another in this loop
    -- (the order of a set-returning query is not guaranteed): no deadlock.
    FOR i IN 1 .. coalesce(array_length(p_lock_keys, 1), 0) LOOP
        IF i > 1 AND p_lock_keys[i] <= p_lock_keys[i - 1] THEN
            RAISE EXCEPTION 'pgdcb: lock keys not strictly ascending at %', i USING ERRCODE = 'PD004';
        END IF;
        IF p_lock_excl[i] THEN
            PERFORM pg_advisory_xact_lock(p_lock_keys[i]);
        ELSE
            PERFORM pg_advisory_xact_lock_shared(p_lock_keys[i]);
        END IF;
    END LOOP;

    -- 2. Idempotency, against the whole log, before the condition: a retry of
    -- an append that committed must read as "already applied", not as a
    -- conflict with its own events. Each statement below runs in a fresh
    -- snapshot taken after the locks (READ COMMITTED, VOLATILE function).
    IF p_idem IS NOT NULL THEN
        conflict_position := {{schema}}.first_unseen_match(p_idem, false, '0', 0, '{}');
        IF conflict_position IS NOT NULL THEN
            status := 'idempotent';
            RETURN;
        END IF;
    END IF;

    -- 3. The condition: a matching event the decision did not see (see
    -- first_unseen_match). A committed transaction not visible in the
    -- decision's snapshot either started after it (id >= xmax, which sorts
    -- after the cursor: the cursor is at or before the last visible event) or
    -- was in progress (its id is in the snapshot's xip list).
    IF p_cond IS NOT NULL THEN
        conflict_position := {{schema}}.first_unseen_match(p_cond,
            (p_after_tx, p_after_pos) > ('0'::xid8, 0::bigint) OR p_after_snap IS NOT NULL,
            p_after_tx, p_after_pos,
            CASE WHEN p_after_snap IS NULL THEN '{}'::xid8[]
                 ELSE ARRAY(SELECT pg_snapshot_xip(p_after_snap)) END);
        IF conflict_position IS NOT NULL THEN
            status := 'condition';
            RETURN;
        END IF;
    END IF;

    -- 4. Insert in batch order (positions ascend with the batch index).
    WITH src AS (
        SELECT n, sum(p_tag_counts[n]) OVER (ORDER BY n) AS tag_end
          FROM generate_subscripts(p_types, 1) AS n
    ), ins AS (
        INSERT INTO {{schema}}.events (type, tags, data, metadata, event_id)
        SELECT p_types[n],
               coalesce(p_tags[tag_end - p_tag_counts[n] + 1 : tag_end], '{}'),
               p_data[n], p_metadata[n], p_event_ids[n]
          FROM src
         ORDER BY n
        RETURNING position
    )
    SELECT array_agg(ins.position ORDER BY ins.position) INTO positions FROM ins;

    tx := pg_current_xact_id();
    status := 'ok';
    -- No NOTIFY here: a notifying transaction holds a database-wide lock
    -- through its commit (and WAL flush), which serialised 8 writers to 0.17x of
    -- the INSERT floor. The Go side notifies after commit, coalesced.
END $$;
