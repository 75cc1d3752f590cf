-- append_group: group commit (docs/GROUPCOMMIT.md). Several independent
-- appends (the members), sent by the store's group committer in ONE call and
-- committed in ONE transaction, each decided exactly as if the members had
-- run one after another in arrival order:
--   1. the misuse checks of append_events (READ COMMITTED, no xid yet);
--   2. the UNION of the members' lock keys, computed by the caller, each key
--      once in its strongest mode, strictly ascending, taken in one pass
--      before any check (escalated by the caller to the global key exclusive
--      when the union is too large);
--   3. for each member in order: its idempotency items, then its condition
--      items, each its own statement (READ COMMITTED, VOLATILE: it sees every
--      append committed before the locks were granted AND the earlier
--      members' inserts of this transaction). A member whose check fails
--      writes nothing. The events of the members that passed are inserted
--      together, in member order, by one statement: before the next member
--      that has checks (so that its checks see them) and after the last
--      member. A group of plain appends is one INSERT; a group whose members
--      all have checks inserts one statement per member;
--   4. per member: status 'ok' | 'idempotent' | 'condition'.
-- The misuse checks, the key locks, the check statements and their
-- index-friendly shapes, and the SET clauses are append_events' text
-- (_append.sql, with the comments on their plans).
--
-- One INSERT per run of passing members (docs/GROUPCOMMIT.md, "One INSERT
-- per run"), measured with pgbench (one client, synchronous_commit off, 2000
-- calls, server CPU of the cluster's processes per call; bench/PROFILE.md): a
-- group of 16 one-event appends without checks, 710-885 us per call with an
-- INSERT per member against 610-700 us.
--
-- Events of all members are passed column-wise, concatenated in member order;
-- member m has p_member_events[m] events. Check items likewise, member m has
-- p_member_items[m] items (its idempotency items first). Member m's cursor is
-- (p_after_tx[m], p_after_pos[m], p_after_snap[m]), ('0', 0, NULL) for none;
-- the snapshot is passed as text; p_after_at[m] is the recorded time of its
-- event (NULL when the cursor carries none, or p_after_at NULL: calls made
-- before it existed).
--
-- Results: statuses[m]; conflicts[m] the matching event's position (NULL for
-- 'ok'); positions: the positions of the 'ok' members' events, concatenated in
-- member order; tx: the transaction id (NULL when no member wrote);
-- occurred_at: the events' recorded time (now(), their column's default).
-- The form before p_after_at and occurred_at (a new argument or result needs
-- a new function).
DROP FUNCTION IF EXISTS {{schema}}.append_group(text[], integer[], text[], jsonb[], jsonb[], uuid[],
    integer[], bigint[], boolean[], boolean[], integer[], text[], integer[], text[], integer[],
    xid8[], bigint[], text[]);

CREATE OR REPLACE FUNCTION {{schema}}.append_group(
{{include "event_args" . | indent 4}}
    p_member_events    integer[],
{{include "item_args" . | indent 4}}
    p_member_items     integer[],
    p_after_tx         xid8[],
    p_after_pos        bigint[],
    p_after_snap       text[],
    p_after_at         timestamptz[] DEFAULT NULL,
    OUT statuses    text[],
    OUT tx          xid8,
    OUT positions   bigint[],
    OUT conflicts   bigint[],
    OUT occurred_at timestamptz)
{{include "append_settings" . }}
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
{{include "check_vars" . | indent 4}}
    v_status  text;
    v_ins     bigint[];
    v_mtypes  text[];
    v_mcounts integer[];
    v_mtags   text[];
    v_atx     xid8;
    v_apos    bigint;
    v_snap    pg_snapshot;
    v_aat     timestamptz;
    v_nm      integer := coalesce(array_length(p_member_events, 1), 0);
    v_pe      integer := 0;  -- events waiting for the next insert: entries v_pe0+1 .. v_pe0+v_pe
    v_pe0     integer := 0;
    v_pg0     integer := 0;  -- their tags start after entry v_pg0 of p_tags
    v_pt      integer := 0;  -- and number v_pt
BEGIN
{{include "misuse_checks" . | indent 4}}

    -- 2. The union of the members' keys, before any check.
{{include "lock_keys" . | indent 4}}

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
{{include "insert_events" (args "Counts" "v_mcounts" "Series" "generate_series(1, v_pe)" "Types" "v_mtypes" "Tags" "v_mtags" "Off" "v_pe0 + " "Into" "v_ins") | indent 16}}
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
        v_aat := p_after_at[m];
        v_cursor := (v_atx, v_apos) > ('0'::xid8, 0::bigint) OR v_snap IS NOT NULL;
        IF p_member_items[m] > 0 AND v_cursor THEN
{{include "cursor" (args "Snap" "v_snap" "Tx" "v_atx" "Pos" "v_apos" "At" "v_aat") | indent 12}}
        END IF;
        FOR i IN v_ii + 1 .. v_ii + p_member_items[m] LOOP
{{include "item_entries" . | indent 12}}
            IF v_status <> 'ok' THEN
                CONTINUE; -- already failed: only consume the item's entries
            END IF;

{{include "item_check" (args "Tx" "v_atx" "Pos" "v_apos") | indent 12}}
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
    occurred_at := now();
    -- No NOTIFY here (see append_events): the Go side notifies once per group.
END $$;

REVOKE ALL ON FUNCTION {{schema}}.append_group FROM PUBLIC;
