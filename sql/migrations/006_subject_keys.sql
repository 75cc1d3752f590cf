-- Crypto-shredding (docs/LIFECYCLE.md, "Erasing a person's data"): one data
-- key per subject, under which the personal fields of events are sealed at
-- append (AES-256-GCM), stored wrapped by the application's key-encryption
-- key (eventstore.Config.KEK). Erase deletes a subject's row in the
-- transaction that appends its erasure event: the ciphertext in events, WAL
-- and backups can no longer be opened. The append-only trigger covers events
-- only; this table is meant to lose rows.
--
-- key_id names the key in each sealed value, so a later key of the same
-- subject (after an erasure) never opens what was sealed before.
-- created_xid is the transaction that made the key: every event sealed
-- under it has a later transaction id, so Erase drops the decision snapshots
-- at or after it (the snapshots that may have folded the subject's data).
CREATE TABLE {{schema}}.subject_keys (
    subject     text        PRIMARY KEY CHECK (length(subject) BETWEEN 1 AND 256),
    key_id      uuid        NOT NULL UNIQUE,
    wrapped     bytea       NOT NULL,
    created_xid xid8        NOT NULL DEFAULT pg_current_xact_id(),
    created_at  timestamptz NOT NULL DEFAULT now()
);
