{{/*
The text the owner's functions (delete_events_tagged, rebase_transaction_ids)
share: they run as their owner, whose statements alone the append-only
trigger lets through, with a fixed search_path (docs/SECURITY.md).
*/}}

{{define "owner_settings"}}
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
{{end}}
