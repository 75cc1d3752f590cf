-- The pgdcb schema as a migrated database has it, generated from the catalog
-- (internal/schemadump) of a schema migrated by sql.Migrate, then by
-- runstore.Migrate; the schema's name reads as pgdcb. Do not edit: change
-- sql/migrations (tables, indexes), sql/functions (server functions) or
-- runstore/migrations, then run `make schema` (TestSchemaSQLIsCurrent fails
-- until then). docs/SCHEMA.md.

-- sql.Migrate

CREATE SCHEMA pgdcb;

CREATE TABLE pgdcb.checkpoints (
    name text NOT NULL,
    transaction_id xid8 DEFAULT '0'::xid8 NOT NULL,
    "position" bigint DEFAULT 0 NOT NULL,
    status text DEFAULT 'ACTIVE'::text NOT NULL,
    error_count integer DEFAULT 0 NOT NULL,
    last_error text,
    leader text,
    heartbeat_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT checkpoints_pkey PRIMARY KEY (name),
    CONSTRAINT checkpoints_status_check CHECK ((status = ANY (ARRAY['ACTIVE'::text, 'PAUSED'::text, 'FAILED'::text])))
);

CREATE TABLE pgdcb.commands (
    transaction_id xid8 DEFAULT pg_current_xact_id() NOT NULL,
    command_id uuid,
    type text NOT NULL,
    data jsonb NOT NULL,
    metadata jsonb,
    occurred_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT commands_command_id_key UNIQUE (command_id),
    CONSTRAINT commands_pkey PRIMARY KEY (transaction_id),
    CONSTRAINT commands_type_check CHECK (((length(type) >= 1) AND (length(type) <= 64)))
);

CREATE TABLE pgdcb.decision_snapshot_epoch (
    id boolean DEFAULT true NOT NULL,
    epoch bigint NOT NULL,
    CONSTRAINT decision_snapshot_epoch_id_check CHECK (id),
    CONSTRAINT decision_snapshot_epoch_pkey PRIMARY KEY (id)
);

CREATE TABLE pgdcb.decision_snapshots (
    name text NOT NULL,
    version integer NOT NULL,
    query_key bytea NOT NULL,
    query_text text NOT NULL,
    transaction_id xid8 NOT NULL,
    "position" bigint NOT NULL,
    state bytea NOT NULL,
    epoch bigint NOT NULL,
    saved_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT decision_snapshots_pkey PRIMARY KEY (name, query_key, version)
);

CREATE TABLE pgdcb.events (
    "position" bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    transaction_id xid8 DEFAULT pg_current_xact_id() NOT NULL,
    type text NOT NULL,
    tags text[] NOT NULL,
    data jsonb NOT NULL,
    metadata jsonb,
    event_id uuid,
    occurred_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT events_pkey PRIMARY KEY ("position"),
    CONSTRAINT events_type_length CHECK (((length(type) >= 1) AND (length(type) <= 64)))
);

CREATE TABLE pgdcb.schema_functions (
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schema_functions_pkey PRIMARY KEY (name)
);

CREATE TABLE pgdcb.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    checksum text,
    CONSTRAINT schema_migrations_pkey PRIMARY KEY (version)
);

CREATE UNIQUE INDEX events_event_id ON pgdcb.events USING btree (event_id) WHERE (event_id IS NOT NULL);

CREATE INDEX events_log_order ON pgdcb.events USING btree (transaction_id, "position");

CREATE INDEX events_tags ON pgdcb.events USING gin (tags) WITH (fastupdate=off);

CREATE INDEX events_type_log_order ON pgdcb.events USING btree (type, transaction_id, "position");

CREATE OR REPLACE FUNCTION pgdcb.append_events(p_types text[], p_tag_counts integer[], p_tags text[], p_data jsonb[], p_metadata jsonb[], p_event_ids uuid[], p_lock_keys bigint[], p_lock_excl boolean[], p_item_idem boolean[], p_item_type_counts integer[], p_item_types text[], p_item_tag_counts integer[], p_item_tags text[], p_after_tx xid8, p_after_pos bigint, p_after_snap pg_snapshot, OUT status text, OUT tx xid8, OUT positions bigint[], OUT conflict_position bigint)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
 SET jit TO 'off'
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    -- global key, exclusive for the checks' keys.
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
            -- A recent decision (the usual case): few rows were written since the
            -- cursor. Positions follow log order closely, so the identity sequence tells
            -- how many.
            v_recent := coalesce(pg_sequence_last_value('pgdcb.events_position_seq'), 0) - p_after_pos <= 1000;
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
                SELECT e.position INTO v_pos FROM pgdcb.events e
                 WHERE e.tags @> v_tags
                 LIMIT 1;
            ELSIF v_types IS NOT NULL THEN
                SELECT e.position INTO v_pos FROM pgdcb.events e
                 WHERE e.type = ANY (v_types)
                 LIMIT 1;
            ELSE
                SELECT e.position INTO v_pos FROM pgdcb.events e LIMIT 1;
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
                SELECT e.position INTO v_pos FROM pgdcb.events e
                 WHERE (e.transaction_id, e.position) > (p_after_tx, p_after_pos)
                   AND (v_tags IS NULL OR (e.tags @> v_tags) IS TRUE)
                   AND (v_types IS NULL OR (e.type = ANY (v_types)) IS TRUE)
                 LIMIT 1;
            ELSE
                SELECT e.position INTO v_pos FROM pgdcb.events e
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
            v_sql := 'SELECT e.position FROM pgdcb.events e WHERE TRUE';
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
        INSERT INTO pgdcb.events (type, tags, data, metadata, event_id)
        VALUES (p_types[1], coalesce(p_tags, '{}'), p_data[1], p_metadata[1], p_event_ids[1])
        RETURNING ARRAY[position] INTO positions;
    ELSE
        WITH src AS (
            SELECT n, sum(p_tag_counts[n]) OVER (ORDER BY n) AS tag_end
              FROM generate_subscripts(p_types, 1) AS n
        ), ins AS (
            INSERT INTO pgdcb.events (type, tags, data, metadata, event_id)
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
END $function$;

REVOKE ALL ON FUNCTION pgdcb.append_events(text[],integer[],text[],jsonb[],jsonb[],uuid[],bigint[],boolean[],boolean[],integer[],text[],integer[],text[],xid8,bigint,pg_snapshot) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.append_group(p_types text[], p_tag_counts integer[], p_tags text[], p_data jsonb[], p_metadata jsonb[], p_event_ids uuid[], p_member_events integer[], p_lock_keys bigint[], p_lock_excl boolean[], p_item_idem boolean[], p_item_type_counts integer[], p_item_types text[], p_item_tag_counts integer[], p_item_tags text[], p_member_items integer[], p_after_tx xid8[], p_after_pos bigint[], p_after_snap text[], OUT statuses text[], OUT tx xid8, OUT positions bigint[], OUT conflicts bigint[])
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET enable_seqscan TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
 SET jit TO 'off'
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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

    -- 2. The union of the members' keys, before any check.
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
                INSERT INTO pgdcb.events (type, tags, data, metadata, event_id)
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
                    INSERT INTO pgdcb.events (type, tags, data, metadata, event_id)
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
            -- A recent decision (the usual case): few rows were written since the
            -- cursor. Positions follow log order closely, so the identity sequence tells
            -- how many.
            v_recent := coalesce(pg_sequence_last_value('pgdcb.events_position_seq'), 0) - v_apos <= 1000;
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
                -- Any match, for an item with tags or types but not both, or
                -- neither: the shape has one index path, and the cached statement
                -- is fixed to it (see the top).
                IF v_tags IS NOT NULL THEN
                    SELECT e.position INTO v_pos FROM pgdcb.events e
                     WHERE e.tags @> v_tags
                     LIMIT 1;
                ELSIF v_types IS NOT NULL THEN
                    SELECT e.position INTO v_pos FROM pgdcb.events e
                     WHERE e.type = ANY (v_types)
                     LIMIT 1;
                ELSE
                    SELECT e.position INTO v_pos FROM pgdcb.events e LIMIT 1;
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
                    SELECT e.position INTO v_pos FROM pgdcb.events e
                     WHERE (e.transaction_id, e.position) > (v_atx, v_apos)
                       AND (v_tags IS NULL OR (e.tags @> v_tags) IS TRUE)
                       AND (v_types IS NULL OR (e.type = ANY (v_types)) IS TRUE)
                     LIMIT 1;
                ELSE
                    SELECT e.position INTO v_pos FROM pgdcb.events e
                     WHERE ((e.transaction_id, e.position) > (v_atx, v_apos) OR e.transaction_id = ANY (v_xip))
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
                v_sql := 'SELECT e.position FROM pgdcb.events e WHERE TRUE';
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
END $function$;

REVOKE ALL ON FUNCTION pgdcb.append_group(text[],integer[],text[],jsonb[],jsonb[],uuid[],integer[],bigint[],boolean[],boolean[],integer[],text[],integer[],text[],integer[],xid8[],bigint[],text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.delete_events_tagged(p_tag text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    n bigint;
BEGIN
    LOCK TABLE pgdcb.decision_snapshots IN SHARE ROW EXCLUSIVE MODE;
    PERFORM set_config('pgdcb.allow_delete', 'on', true);
    -- events_tags (GIN) finds the rows.
    DELETE FROM pgdcb.events WHERE tags @> ARRAY[p_tag];
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('pgdcb.allow_delete', 'off', true);
    IF n > 0 THEN
        UPDATE pgdcb.decision_snapshot_epoch SET epoch = epoch + 1;
        DELETE FROM pgdcb.decision_snapshots;
    END IF;
    RETURN n;
END $function$;

REVOKE ALL ON FUNCTION pgdcb.delete_events_tagged(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.events_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
END $function$;

REVOKE ALL ON FUNCTION pgdcb.events_append_only() FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.rebase_transaction_ids()
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    n bigint;
BEGIN
    LOCK TABLE pgdcb.events, pgdcb.commands, pgdcb.checkpoints IN EXCLUSIVE MODE;
    CREATE TEMP TABLE pgdcb_rebase_map ON COMMIT DROP AS
        SELECT tx AS old_tx, ((row_number() OVER (ORDER BY tx)) + 2)::text::xid8 AS new_tx
          FROM (SELECT transaction_id AS tx FROM pgdcb.events
                UNION SELECT transaction_id FROM pgdcb.commands
                UNION SELECT transaction_id FROM pgdcb.checkpoints WHERE transaction_id <> '0') ids;
    SELECT count(*) INTO n FROM pg_temp.pgdcb_rebase_map;
    IF n + 2 >= pg_current_xact_id()::text::numeric THEN
        RAISE EXCEPTION 'pgdcb: % stored transaction ids do not fit below this cluster''s transaction counter (%): advance it first',
            n, pg_current_xact_id() USING ERRCODE = 'PD005';
    END IF;
    CREATE INDEX ON pg_temp.pgdcb_rebase_map (old_tx);
    ANALYZE pg_temp.pgdcb_rebase_map;
    PERFORM set_config('pgdcb.allow_rebase', 'on', true);
    UPDATE pgdcb.events e SET transaction_id = m.new_tx
      FROM pg_temp.pgdcb_rebase_map m WHERE e.transaction_id = m.old_tx AND m.old_tx <> m.new_tx;
    PERFORM set_config('pgdcb.allow_rebase', 'off', true);
    UPDATE pgdcb.commands c SET transaction_id = (m.new_tx::text::numeric + 4611686018427387904)::text::xid8
      FROM pg_temp.pgdcb_rebase_map m WHERE c.transaction_id = m.old_tx;
    UPDATE pgdcb.commands SET transaction_id = (transaction_id::text::numeric - 4611686018427387904)::text::xid8
     WHERE transaction_id::text::numeric >= 4611686018427387904;
    UPDATE pgdcb.checkpoints k SET transaction_id = m.new_tx
      FROM pg_temp.pgdcb_rebase_map m WHERE k.transaction_id = m.old_tx;
    RETURN n;
END $function$;

REVOKE ALL ON FUNCTION pgdcb.rebase_transaction_ids() FROM PUBLIC;

CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON pgdcb.events FOR EACH STATEMENT EXECUTE FUNCTION pgdcb.events_append_only();

CREATE TRIGGER events_no_update_delete BEFORE DELETE OR UPDATE ON pgdcb.events FOR EACH ROW EXECUTE FUNCTION pgdcb.events_append_only();

-- runstore.Migrate adds

CREATE TABLE pgdcb.run_snapshots (
    run_id text NOT NULL,
    status text NOT NULL,
    last_event_seq bigint DEFAULT 0 NOT NULL,
    snapshot_data jsonb DEFAULT '{}'::jsonb NOT NULL,
    started_at timestamp with time zone,
    completed_at timestamp with time zone,
    projected_at timestamp with time zone DEFAULT now() NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    stale_since timestamp with time zone,
    stale_reason text,
    CONSTRAINT run_snapshots_pkey PRIMARY KEY (run_id)
);

CREATE TABLE pgdcb.runstore_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    checksum text,
    CONSTRAINT runstore_migrations_pkey PRIMARY KEY (version)
);

CREATE INDEX events_runstore_log_order ON pgdcb.events USING btree (transaction_id, "position") WHERE (metadata @> '{"runstore": "v1"}'::jsonb);

CREATE UNIQUE INDEX events_runstore_run_seq ON pgdcb.events USING btree (((data ->> 'runId'::text)), ((data -> 'runSeq'::text))) WHERE (metadata @> '{"runstore": "v1"}'::jsonb);

CREATE INDEX run_snapshots_stale ON pgdcb.run_snapshots USING btree (stale_since) WHERE (stale_since IS NOT NULL);
