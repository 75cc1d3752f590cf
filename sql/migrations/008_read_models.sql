-- Read models that reset safely (docs/LIFECYCLE.md, "Resetting and
-- rebuilding read models"). read_model: the tables a projection's read model
-- lives in (quoted, schema-qualified), recorded by its runner (Config.Tables)
-- so that any Reset (the library, `pgdcb projections reset`, an operator)
-- empties them in the transaction that moves the checkpoint back. views: the
-- views readers read instead (Config.Views), one per table, same order.
ALTER TABLE {{schema}}.checkpoints ADD COLUMN read_model text[];
ALTER TABLE {{schema}}.checkpoints ADD COLUMN views text[];

-- Which projection's table each view shows now: claimed by the first
-- projection that registers the view, moved by projection.Switch in the
-- transaction that re-creates the view (blue/green rebuilds).
CREATE TABLE {{schema}}.read_model_views (
    view_name  text PRIMARY KEY,
    projection text NOT NULL REFERENCES {{schema}}.checkpoints (name),
    table_name text NOT NULL
);
