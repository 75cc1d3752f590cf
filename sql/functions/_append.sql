{{/*
The text append_events and append_group share, written once. A file whose
name starts with "_" holds only named templates; each function's file
includes them with {{include "name" data | indent N}}. Shared as text, not as
a nested PL/pgSQL call: append_events' header measured a nested call as
slower. Comments between the templates' lines are SQL comments and stay in
the rendered functions; this one does not.
*/}}

{{/* The arguments: the events, column-wise (p_tag_counts[i] tags of
event i in p_tags), and the check items (one entry per item in each
p_item_* array, with the key locks before them). */}}
{{define "event_args"}}
p_types            text[],
p_tag_counts       integer[],
p_tags             text[],
p_data             jsonb[],
p_metadata         jsonb[],
p_event_ids        uuid[],
{{end}}

{{define "item_args"}}
p_lock_keys        bigint[],
p_lock_excl        boolean[],
p_item_idem        boolean[],
p_item_type_counts integer[],
p_item_types       text[],
p_item_tag_counts  integer[],
p_item_tags        text[],
{{end}}

{{/* The variables of the checks. */}}
{{define "check_vars"}}
v_types   text[];
v_tags    text[];
v_cursor  boolean;
v_any     boolean;
v_locked  boolean;
v_recent  boolean;
v_xip     xid8[];
v_sql     text;
v_pos     bigint;
{{end}}

{{define "append_settings"}}
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
-- spent about 5 ms compiling a plan that reads 5 buffers (bench/tagindex/TAGINDEX.md).
SET jit = off
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
{{end}}

{{define "misuse_checks"}}
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
{{end}}

{{define "lock_keys"}}
-- One key per entry, strongest mode, strictly ascending, taken one statement
-- after another in this loop (the order of a set-returning query is not
-- guaranteed): no deadlock.
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
{{end}}

{{/* The decision's cursor, for a query with a cursor: the transactions in
progress at its snapshot (.Snap), whether it is recent (.Pos), and whether
its event (.Tx, .Pos, recorded at .At when not NULL) is in the log (else
v_cursor becomes false). */}}
{{define "cursor"}}
v_xip := CASE WHEN {{.Snap}} IS NULL THEN '{}'::xid8[]
              ELSE ARRAY(SELECT pg_snapshot_xip({{.Snap}})) END;
-- A recent decision (the usual case): few rows were written since the
-- cursor. Positions follow log order closely, so the identity sequence tells
-- how many.
v_recent := coalesce(pg_sequence_last_value('{{schema}}.events_position_seq'), 0) - {{.Pos}} <= 1000;
-- A cursor names an event of the log. One naming an event this log does not
-- have was taken on a server ahead of this one: after a failover to a standby
-- that was behind, the ids after this log's last one are handed out again,
-- and new events would sort at or before the cursor as if seen. Both the
-- transaction id and the position are handed out again, so a different event
-- can sit at the cursor's point: the event's recorded time (.At, NULL for a
-- cursor that does not carry it) tells it from the cursor's. Nothing is
-- then proven seen: the check counts every matching event (a conflict when
-- there is one; retention that deleted the cursor's event costs the same).
-- One probe of events_log_order.
IF ({{.Tx}}, {{.Pos}}) > ('0'::xid8, 0::bigint) AND NOT EXISTS (SELECT FROM {{schema}}.events e
        WHERE e.transaction_id = {{.Tx}} AND e.position = {{.Pos}}
          AND ({{.At}} IS NULL OR e.occurred_at = {{.At}})) THEN
    v_cursor := false;
END IF;
{{end}}

{{/* Item i's types and tags: the next entries of p_item_types and
p_item_tags (v_ti and v_gi count those consumed). */}}
{{define "item_entries"}}
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
{{end}}

{{/* The check of item i (v_types, v_tags; the decision's cursor is .Tx,
.Pos): v_pos is the position of a matching event, NULL when none. */}}
{{define "item_check"}}
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
         WHERE (e.transaction_id, e.position) > ({{.Tx}}, {{.Pos}})
           AND (v_tags IS NULL OR (e.tags @> v_tags) IS TRUE)
           AND (v_types IS NULL OR (e.type = ANY (v_types)) IS TRUE)
         LIMIT 1;
    ELSE
        SELECT e.position INTO v_pos FROM {{schema}}.events e
         WHERE ((e.transaction_id, e.position) > ({{.Tx}}, {{.Pos}}) OR e.transaction_id = ANY (v_xip))
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
        USING v_tags, v_types, {{.Tx}}, {{.Pos}}, v_xip;
END IF;
{{end}}

{{/* Several events, in one statement, in batch order (positions ascend with
the batch index): entry n (1 .. the count) of .Types, its tag count in
.Counts, its tags in .Tags, its data, metadata and event id at index .Off n of
p_data, p_metadata and p_event_ids; .Series enumerates n; the positions go to
.Into. */}}
{{define "insert_events"}}
WITH src AS (
    SELECT n, sum({{.Counts}}[n]) OVER (ORDER BY n) AS tag_end
      FROM {{.Series}} AS n
), ins AS (
    INSERT INTO {{schema}}.events (type, tags, data, metadata, event_id)
    SELECT {{.Types}}[n],
           coalesce({{.Tags}}[tag_end - {{.Counts}}[n] + 1 : tag_end], '{}'),
           p_data[{{.Off}}n], p_metadata[{{.Off}}n], p_event_ids[{{.Off}}n]
      FROM src
     ORDER BY n
    RETURNING position
)
SELECT array_agg(ins.position ORDER BY ins.position) INTO {{.Into}} FROM ins;
{{end}}
