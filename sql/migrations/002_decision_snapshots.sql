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
