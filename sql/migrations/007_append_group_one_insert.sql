-- append_group, one INSERT per run of passing members (docs/GROUPCOMMIT.md,
-- "One INSERT per run"). 003_append_group inserted each member's events with
-- a statement of its own, right after the member's checks; a group of 16
-- one-event Appends was 16 INSERT statements. Here the events of members
-- that passed wait, in member order, and are inserted together by one
-- statement: before the next member that has checks (so that its checks
-- see them, as before: a member is still decided exactly as if the members
-- had run one after another) and after the last member. A group of plain
-- appends is one INSERT; a group whose members all have checks inserts as
-- before, one statement per member.
--
-- Measured with pgbench (one client, synchronous_commit off, 2000 calls,
-- server CPU of the cluster's processes per call; docs/PROFILE.md): a group
-- of 16 one-event appends without checks, 710-885 µs per call with 003's
-- function against 610-700 µs with this one.
--
-- Everything else (arguments, results, locks, the checks and their plans)
-- is 003's.
CREATE OR REPLACE FUNCTION {{schema}}.append_group(
    p_types            text[],
    p_tag_counts       integer[],
    p_tags             text[],
    p_data             jsonb[],
    p_metadata         jsonb[],
    p_event_ids        uuid[],
    p_member_events    integer[],
    p_lock_keys        bigint[],
    p_lock_excl        boolean[],
    p_item_idem        boolean[],
    p_item_type_counts integer[],
    p_item_types       text[],
    p_item_tag_counts  integer[],
    p_item_tags        text[],
    p_member_items     integer[],
    p_after_tx         xid8[],
    p_after_pos        bigint[],
    p_after_snap       text[],
    OUT statuses   text[],
    OUT tx         xid8,
    OUT positions  bigint[],
    OUT conflicts  bigint[])
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
DECLARE
    i         integer;
    m         integer;
    v_ei      integer := 0;  -- events consumed
    v_gi_ev   integer := 0;  -- event tags consumed
    v_ii      integer := 0;  -- items consumed
    v_ti      integer := 0;  -- item types consumed
    v_gi      integer := 0;  -- item tags consumed
    v_n       integer;
    v_ntags   integer;
    v_types   text[];
    v_tags    text[];
    v_cursor  boolean;
    v_any     boolean;
    v_locked  boolean;
    v_recent  boolean;
    v_xip     xid8[];
    v_sql     text;
    v_pos     bigint;
    v_status  text;
    v_ins     bigint[];
    v_mtypes  text[];
    v_mcounts integer[];
    v_mtags   text[];
    v_atx     xid8;
    v_apos    bigint;
    v_snap    pg_snapshot;
    v_nm      integer := coalesce(array_length(p_member_events, 1), 0);
    v_pe      integer := 0;  -- events waiting for the next insert: entries v_pe0+1 .. v_pe0+v_pe
    v_pe0     integer := 0;
    v_pg0     integer := 0;  -- their tags start after entry v_pg0 of p_tags
    v_pt      integer := 0;  -- and number v_pt
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgdcb: append needs READ COMMITTED isolation, this transaction is %',
            upper(current_setting('transaction_isolation')) USING ERRCODE = 'PD001';
    END IF;
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'pgdcb: append must be the first write of its transaction, and only one append per transaction (this transaction already wrote)'
            USING ERRCODE = 'PD002';
    END IF;

    -- 2. The union of the members' keys, before any check.
    FOR i IN 1 .. coalesce(array_length(p_lock_keys, 1), 0) LOOP
        IF i > 1 AND p_lock_keys[i] <= p_lock_keys[i - 1] THEN
            RAISE EXCEPTION 'pgdcb: lock keys not strictly ascending at %', i USING ERRCODE = 'PD004';
        END IF;
        IF p_lock_excl[i] THEN
            v_locked := pg_advisory_xact_lock(p_lock_keys[i])::text = '';
        ELSE
            v_locked := pg_advisory_xact_lock_shared(p_lock_keys[i])::text = '';
        END IF;
    END LOOP;

    statuses := '{}';
    conflicts := '{}';
    positions := '{}';
    -- 3. Members in arrival order. The events of members that passed wait
    -- in (v_pe0, v_pe, v_pg0, v_pt) and are inserted together, in member
    -- order, by one statement: before the next member that has checks (which
    -- must see them) and after the last member (iteration v_nm + 1 only
    -- does that). A group of plain appends is one INSERT.
    FOR m IN 1 .. v_nm + 1 LOOP
        IF v_pe > 0 AND (m > v_nm OR p_member_items[m] > 0) THEN
            v_mcounts := p_tag_counts[v_pe0 + 1 : v_pe0 + v_pe];
            IF v_pe = 1 THEN
                INSERT INTO {{schema}}.events (type, tags, data, metadata, event_id)
                VALUES (p_types[v_pe0 + 1], p_tags[v_pg0 + 1 : v_pg0 + v_pt],
                        p_data[v_pe0 + 1], p_metadata[v_pe0 + 1], p_event_ids[v_pe0 + 1])
                RETURNING ARRAY[position] INTO v_ins;
            ELSE
                v_mtypes := p_types[v_pe0 + 1 : v_pe0 + v_pe];
                v_mtags := p_tags[v_pg0 + 1 : v_pg0 + v_pt];
                WITH src AS (
                    SELECT n, sum(v_mcounts[n]) OVER (ORDER BY n) AS tag_end
                      FROM generate_series(1, v_pe) AS n
                ), ins AS (
                    INSERT INTO {{schema}}.events (type, tags, data, metadata, event_id)
                    SELECT v_mtypes[n],
                           coalesce(v_mtags[tag_end - v_mcounts[n] + 1 : tag_end], '{}'),
                           p_data[v_pe0 + n], p_metadata[v_pe0 + n], p_event_ids[v_pe0 + n]
                      FROM src
                     ORDER BY n
                    RETURNING position
                )
                SELECT array_agg(ins.position ORDER BY ins.position) INTO v_ins FROM ins;
            END IF;
            positions := positions || v_ins;
            v_pe := 0;
            v_pt := 0;
        END IF;
        EXIT WHEN m > v_nm;
        v_status := 'ok';
        v_pos := NULL;
        v_atx := p_after_tx[m];
        v_apos := p_after_pos[m];
        v_snap := p_after_snap[m]::pg_snapshot;
        v_cursor := (v_atx, v_apos) > ('0'::xid8, 0::bigint) OR v_snap IS NOT NULL;
        IF p_member_items[m] > 0 AND v_cursor THEN
            v_xip := CASE WHEN v_snap IS NULL THEN '{}'::xid8[]
                          ELSE ARRAY(SELECT pg_snapshot_xip(v_snap)) END;
            v_recent := coalesce(pg_sequence_last_value('{{schema}}.events_position_seq'), 0) - v_apos <= 1000;
        END IF;
        FOR i IN v_ii + 1 .. v_ii + p_member_items[m] LOOP
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
            IF v_status <> 'ok' THEN
                CONTINUE; -- already failed: only consume the item's entries
            END IF;

            v_any := p_item_idem[i] OR NOT v_cursor;
            IF v_any AND (v_tags IS NULL OR v_types IS NULL) THEN
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
                IF cardinality(v_xip) = 0 THEN
                    SELECT e.position INTO v_pos FROM {{schema}}.events e
                     WHERE (e.transaction_id, e.position) > (v_atx, v_apos)
                       AND (v_tags IS NULL OR (e.tags @> v_tags) IS TRUE)
                       AND (v_types IS NULL OR (e.type = ANY (v_types)) IS TRUE)
                     LIMIT 1;
                ELSE
                    SELECT e.position INTO v_pos FROM {{schema}}.events e
                     WHERE ((e.transaction_id, e.position) > (v_atx, v_apos) OR e.transaction_id = ANY (v_xip))
                       AND (v_tags IS NULL OR (e.tags @> v_tags) IS TRUE)
                       AND (v_types IS NULL OR (e.type = ANY (v_types)) IS TRUE)
                     LIMIT 1;
                END IF;
            ELSE
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
                    USING v_tags, v_types, v_atx, v_apos, v_xip;
            END IF;
            IF v_pos IS NOT NULL THEN
                v_status := CASE WHEN p_item_idem[i] THEN 'idempotent' ELSE 'condition' END;
            END IF;
        END LOOP;
        v_ii := v_ii + p_member_items[m];

        -- The member's events: entries v_ei+1 .. v_ei+n, tags from v_gi_ev.
        v_n := p_member_events[m];
        v_mcounts := p_tag_counts[v_ei + 1 : v_ei + v_n];
        v_ntags := 0;
        FOR i IN 1 .. v_n LOOP
            v_ntags := v_ntags + v_mcounts[i];
        END LOOP;
        IF v_status = 'ok' THEN
            -- Wait for the next insert (contiguous with the waiting ones:
            -- entries follow member order).
            IF v_pe = 0 THEN
                v_pe0 := v_ei;
                v_pg0 := v_gi_ev;
            END IF;
            v_pe := v_pe + v_n;
            v_pt := v_pt + v_ntags;
            conflicts := conflicts || NULL::bigint;
        ELSE
            conflicts := conflicts || v_pos;
        END IF;
        statuses := statuses || v_status;
        v_ei := v_ei + v_n;
        v_gi_ev := v_gi_ev + v_ntags;
    END LOOP;

    tx := pg_current_xact_id_if_assigned();
    -- No NOTIFY here (see append_events): the Go side notifies once per group.
END $$;

REVOKE ALL ON FUNCTION {{schema}}.append_group FROM PUBLIC;
