-- The pgdcb schema as a migrated database has it, generated from the catalog
-- (internal/testing/schemadump) of a schema migrated by sql.Migrate, then by
-- runstore.Migrate; the schema's name reads as pgdcb. A function's body is
-- not repeated here: it is its file in sql/functions (the SHA-256 is of the
-- body the server holds). Do not edit: change sql/migrations (tables, indexes),
-- sql/functions (server functions) or runstore/migrations, then run
-- `make schema` (TestSchemaSQLIsCurrent fails until then). docs/SCHEMA.md.
-- Rendered by PostgreSQL 15.

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
    logical_checkpoint text,
    read_model text[],
    views text[],
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
    version bigint NOT NULL,
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

CREATE TABLE pgdcb.projection_partitions (
    name text NOT NULL,
    partition integer NOT NULL,
    partitions integer NOT NULL,
    key text NOT NULL,
    transaction_id xid8 DEFAULT '0'::xid8 NOT NULL,
    "position" bigint DEFAULT 0 NOT NULL,
    owner text,
    epoch bigint DEFAULT 0 NOT NULL,
    lease_until timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    logical_checkpoint text,
    CONSTRAINT projection_partitions_check CHECK ((partition < partitions)),
    CONSTRAINT projection_partitions_partition_check CHECK ((partition >= 0)),
    CONSTRAINT projection_partitions_pkey PRIMARY KEY (name, partition)
);

CREATE TABLE pgdcb.projection_workers (
    name text NOT NULL,
    worker text NOT NULL,
    lease_until timestamp with time zone NOT NULL,
    CONSTRAINT projection_workers_pkey PRIMARY KEY (name, worker)
);

CREATE TABLE pgdcb.read_model_views (
    view_name text NOT NULL,
    projection text NOT NULL,
    table_name text NOT NULL,
    CONSTRAINT read_model_views_pkey PRIMARY KEY (view_name),
    CONSTRAINT read_model_views_projection_fkey FOREIGN KEY (projection) REFERENCES pgdcb.checkpoints(name)
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

CREATE TABLE pgdcb.subject_keys (
    subject text NOT NULL,
    key_id uuid NOT NULL,
    wrapped bytea NOT NULL,
    created_xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT subject_keys_key_id_key UNIQUE (key_id),
    CONSTRAINT subject_keys_pkey PRIMARY KEY (subject),
    CONSTRAINT subject_keys_subject_check CHECK (((length(subject) >= 1) AND (length(subject) <= 256)))
);

CREATE UNIQUE INDEX events_event_id ON pgdcb.events USING btree (event_id) WHERE (event_id IS NOT NULL);

CREATE INDEX events_log_order ON pgdcb.events USING btree (transaction_id, "position");

CREATE INDEX events_tags ON pgdcb.events USING gin (tags) WITH (fastupdate=off);

CREATE INDEX events_type_log_order ON pgdcb.events USING btree (type, transaction_id, "position");

CREATE OR REPLACE FUNCTION pgdcb.append_events(p_types text[], p_tag_counts integer[], p_tags text[], p_data jsonb[], p_metadata jsonb[], p_event_ids uuid[], p_lock_keys bigint[], p_lock_excl boolean[], p_item_idem boolean[], p_item_type_counts integer[], p_item_types text[], p_item_tag_counts integer[], p_item_tags text[], p_after_tx xid8, p_after_pos bigint, p_after_snap pg_snapshot, p_after_at timestamp with time zone DEFAULT NULL::timestamp with time zone, OUT status text, OUT tx xid8, OUT positions bigint[], OUT conflict_position bigint, OUT occurred_at timestamp with time zone)
RETURNS record LANGUAGE plpgsql SECURITY DEFINER SET enable_seqscan TO 'off' SET plan_cache_mode TO 'force_generic_plan' SET jit TO 'off' SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ ... $function$; -- body: sql/functions/append_events.sql (sha256 d18c570a3bc1978b)
REVOKE ALL ON FUNCTION pgdcb.append_events(text[],integer[],text[],jsonb[],jsonb[],uuid[],bigint[],boolean[],boolean[],integer[],text[],integer[],text[],xid8,bigint,pg_snapshot,timestamp with time zone) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.append_group(p_types text[], p_tag_counts integer[], p_tags text[], p_data jsonb[], p_metadata jsonb[], p_event_ids uuid[], p_member_events integer[], p_lock_keys bigint[], p_lock_excl boolean[], p_item_idem boolean[], p_item_type_counts integer[], p_item_types text[], p_item_tag_counts integer[], p_item_tags text[], p_member_items integer[], p_after_tx xid8[], p_after_pos bigint[], p_after_snap text[], p_after_at timestamp with time zone[] DEFAULT NULL::timestamp with time zone[], OUT statuses text[], OUT tx xid8, OUT positions bigint[], OUT conflicts bigint[], OUT occurred_at timestamp with time zone)
RETURNS record LANGUAGE plpgsql SECURITY DEFINER SET enable_seqscan TO 'off' SET plan_cache_mode TO 'force_generic_plan' SET jit TO 'off' SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ ... $function$; -- body: sql/functions/append_group.sql (sha256 8ed19b85a0943892)
REVOKE ALL ON FUNCTION pgdcb.append_group(text[],integer[],text[],jsonb[],jsonb[],uuid[],integer[],bigint[],boolean[],boolean[],integer[],text[],integer[],text[],integer[],xid8[],bigint[],text[],timestamp with time zone[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.delete_events_tagged(p_tag text)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ ... $function$; -- body: sql/functions/delete_events_tagged.sql (sha256 18219c3606f2736a)
REVOKE ALL ON FUNCTION pgdcb.delete_events_tagged(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.events_append_only()
RETURNS trigger LANGUAGE plpgsql SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ ... $function$; -- body: sql/functions/events_append_only.sql (sha256 7e38adf87be9bf63)
REVOKE ALL ON FUNCTION pgdcb.events_append_only() FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.import_events(p_types text[], p_tag_counts integer[], p_tags text[], p_data jsonb[], p_metadata jsonb[], p_event_ids uuid[], p_occurred_at timestamp with time zone[], p_lock_key bigint, OUT tx xid8, OUT positions bigint[], OUT occurred_at timestamp with time zone)
RETURNS record LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ ... $function$; -- body: sql/functions/import_events.sql (sha256 541194a42b8d6f53)
REVOKE ALL ON FUNCTION pgdcb.import_events(text[],integer[],text[],jsonb[],jsonb[],uuid[],timestamp with time zone[],bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgdcb.rebase_transaction_ids()
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ ... $function$; -- body: sql/functions/rebase_transaction_ids.sql (sha256 9b843fa66aa79b61)
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
