-- Partitioned projections (projection.NewPartitioned, docs/SUBSCRIPTIONS.md
-- "Partitioned projections"): one row per partition of a projection, holding
-- its checkpoint and its lease (owner, epoch, lease_until), and one row per
-- live worker, whose count sets each worker's fair share. Workers claim,
-- renew and release partitions here; a batch commits only while its
-- partition's epoch is the one its worker claimed (fencing).
CREATE TABLE {{schema}}.projection_partitions (
    name           text        NOT NULL,
    partition      integer     NOT NULL CHECK (partition >= 0),
    partitions     integer     NOT NULL CHECK (partition < partitions),
    key            text        NOT NULL,
    transaction_id xid8        NOT NULL DEFAULT '0',
    position       bigint      NOT NULL DEFAULT 0,
    owner          text,
    epoch          bigint      NOT NULL DEFAULT 0,
    lease_until    timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, partition)
);

CREATE TABLE {{schema}}.projection_workers (
    name        text        NOT NULL,
    worker      text        NOT NULL,
    lease_until timestamptz NOT NULL,
    PRIMARY KEY (name, worker)
);
