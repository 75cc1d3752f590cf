-- append_events: the whole append (key locks, idempotency check, condition
-- check, insert) in one server call, one round trip. Called only by package
-- eventstore, which computes the lock keys; docs/CONCURRENCY.md says why each
-- step is where it is. It runs as its owner (SECURITY DEFINER, with a fixed
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
-- status is 'ok', 'idempotent' or 'condition'; conflict_position names the
-- matching event when the append did not happen. Misuse raises PD001 (isolation
-- level), PD002 (not the transaction's first write) or PD004 (lock keys not
-- strictly ascending).
CREATE FUNCTION {{schema}}.append_events(
    p_types            text[],
    p_tag_counts       integer[],
    p_tags             text[],
    p_data             jsonb[],
    p_metadata         jsonb[],
    p_event_ids        uuid[],
    p_lock_keys        bigint[],
    p_lock_excl        boolean[],
    p_item_idem        boolean[],
    p_item_type_counts integer[],
    p_item_types       text[],
    p_item_tag_counts  integer[],
    p_item_tags        text[],
    p_after_tx         xid8,
    p_after_pos        bigint,
    p_after_snap       pg_snapshot,
    OUT status            text,
    OUT tx                xid8,
    OUT positions         bigint[],
    OUT conflict_position bigint)
LANGUAGE plpgsql VOLATILE
-- Each check statement is `… LIMIT 1`. A planner that estimates a tag as
-- moderately common expects a match within a few hundred rows of a sequential
-- scan; when the tag is absent (the usual case for a check that passes) that
-- scan reads the whole table (10-30 ms per append on a 20k-event log,
-- measured). Every check shape has an index path; this only removes the trap.
SET enable_seqscan = off
-- Every cached statement here is written so that its shape fixes its plan
-- (the checks planned per call use EXECUTE, which plans with the values
-- whatever this says). Left to choose, the plan cache kept planning the recent
-- check at every call: its generic plan's estimate (the whole range since an
-- unknown cursor) looked dearer than a custom plan for the real cursor, so it
-- never switched. 32 us per check instead of 9.6 (a loop of 20,000 checks).
SET plan_cache_mode = force_generic_plan
-- And no JIT: a generic plan's cost is estimated for an unknown cursor (the
-- whole range), which at 10M events passes jit_above_cost, and every call then
-- spent about 5 ms compiling a plan that reads 5 buffers (docs/TAGINDEX.md).
SET jit = off
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i        integer;
    v_ti     integer := 0;
    v_gi     integer := 0;
    v_types  text[];
    v_tags   text[];
    v_cursor boolean;
    v_any    boolean;
    v_locked boolean;
    v_recent boolean;
    v_xip    xid8[];
    v_sql    text;
    v_pos    bigint;
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
        -- Assignments, not PERFORM: PL/pgSQL evaluates a simple expression
        -- without starting the executor (1.5 us a key instead of 3.3 us,
        -- measured over 2000 keys; a 100-event batch takes 102 keys). The
        -- void result becomes a boolean only to have something to assign.
        IF p_lock_excl[i] THEN
            v_locked := pg_advisory_xact_lock(p_lock_keys[i])::text = '';
        ELSE
            v_locked := pg_advisory_xact_lock_shared(p_lock_keys[i])::text = '';
        END IF;
    END LOOP;

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
            v_xip := CASE WHEN p_after_snap IS NULL THEN '{}'::xid8[]
                          ELSE ARRAY(SELECT pg_snapshot_xip(p_after_snap)) END;
            -- A recent decision (the usual case): few rows were written since
            -- the cursor. Positions follow log order closely, so the identity
            -- sequence tells how many.
            v_recent := coalesce(pg_sequence_last_value('{{schema}}.events_position_seq'), 0) - p_after_pos <= 1000;
        END IF;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_item_idem, 1), 0) LOOP
        v_types := NULL;
        v_tags := NULL;
        IF p_item_type_counts[i] > 0 THEN
            v_types := p_item_types[v_ti + 1 : v_ti + p_item_type_counts[i]];
            v_ti := v_ti + p_item_type_counts[i];
        END IF;
        IF p_item_tag_counts[i] > 0 THEN
            v_tags := p_item_tags[v_gi + 1 : v_gi + p_item_tag_counts[i]];
            v_gi := v_gi + p_item_tag_counts[i];
        END IF;

        v_any := p_item_idem[i] OR NOT v_cursor;
        IF v_any AND (v_tags IS NULL OR v_types IS NULL) THEN
            -- Any match, for an item with tags or types but not both, or
            -- neither: the shape has one index path, and the cached statement
            -- is fixed to it (see the top).
            IF v_tags IS NOT NULL THEN
                SELECT e.position INTO v_pos FROM {{schema}}.events e
                 WHERE e.tags @> v_tags
                 LIMIT 1;
            ELSIF v_types IS NOT NULL THEN
                SELECT e.position INTO v_pos FROM {{schema}}.events e
                 WHERE e.type = ANY (v_types)
                 LIMIT 1;
            ELSE
                SELECT e.position INTO v_pos FROM {{schema}}.events e LIMIT 1;
            END IF;
        ELSIF NOT v_any AND v_recent THEN
            -- Only the rows since the cursor, through events_log_order, by a
            -- statement whose tag and type tests cannot use an index (`IS
            -- TRUE`): its cached plan is the same whatever the tag, its size or
            -- the state of the statistics. (Left to the planner, a hot tag with
            -- stale statistics was read whole through events_tags at every
            -- append: 500 appends/s instead of 2000.)
            -- Without transactions in progress at the decision, one range
            -- scan; with them, a BitmapOr of the two ranges.
            IF cardinality(v_xip) = 0 THEN
                SELECT e.position INTO v_pos FROM {{schema}}.events e
                 WHERE (e.transaction_id, e.position) > (p_after_tx, p_after_pos)
                   AND (v_tags IS NULL OR (e.tags @> v_tags) IS TRUE)
                   AND (v_types IS NULL OR (e.type = ANY (v_types)) IS TRUE)
                 LIMIT 1;
            ELSE
                SELECT e.position INTO v_pos FROM {{schema}}.events e
                 WHERE ((e.transaction_id, e.position) > (p_after_tx, p_after_pos) OR e.transaction_id = ANY (v_xip))
                   AND (v_tags IS NULL OR (e.tags @> v_tags) IS TRUE)
                   AND (v_types IS NULL OR (e.type = ANY (v_types)) IS TRUE)
                 LIMIT 1;
            END IF;
        ELSE
            -- An item with both tags and types and no cursor, or an old
            -- decision: a statement built for the item's shape and planned
            -- with its real values, so that the planner can weigh the tag
            -- against the type (a hot tag with a rare type read 62k rows
            -- through the tag index in 52 ms at 1M events, against none
            -- through the type index) and against the range since the cursor
            -- (a cached generic plan could not, and picked a scan of everything
            -- since an old snapshot: 41 ms per append with one old transaction
            -- open in the prototype).
            -- "After the cursor" is spelled out as an OR, not as a row
            -- comparison, for the estimate: the planner judges a row
            -- comparison by its first column alone, and when many events share
            -- one transaction (a bulk load) it took "after (tx, 1)" for one row
            -- and scanned the whole range instead of the tag index (15 ms at
            -- 50k events). Plans by EXPLAIN at 1M events
            -- (TestCheckPlansStayOnIndexes): a tag item uses events_tags (GIN)
            -- or a BitmapOr of the events_log_order ranges; a type-only item
            -- events_type_log_order or the ranges; a match-all item the ranges.
            v_sql := 'SELECT e.position FROM {{schema}}.events e WHERE TRUE';
            IF NOT v_any THEN
                v_sql := v_sql || ' AND (e.transaction_id > $3 OR (e.transaction_id = $3 AND e.position > $4)'
                    || ' OR e.transaction_id = ANY ($5))';
            END IF;
            IF v_tags IS NOT NULL THEN
                v_sql := v_sql || ' AND e.tags @> $1';
            END IF;
            IF v_types IS NOT NULL THEN
                v_sql := v_sql || ' AND e.type = ANY ($2)';
            END IF;
            EXECUTE v_sql || ' LIMIT 1' INTO v_pos
                USING v_tags, v_types, p_after_tx, p_after_pos, v_xip;
        END IF;

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
    END IF;

    tx := pg_current_xact_id();
    status := 'ok';
    -- No NOTIFY here: a notifying transaction holds a database-wide lock
    -- through its commit (and WAL flush), which serialised 8 writers to 0.17x of
    -- the INSERT floor. The Go side notifies after commit, coalesced.
END $$;

-- Functions are EXECUTE-able by PUBLIC by default; sql.Grant grants it to the
-- application role.
REVOKE ALL ON FUNCTION {{schema}}.append_events FROM PUBLIC;
