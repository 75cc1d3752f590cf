package runstore

// marker is the metadata of every runstore event; the partial index
// events_runstore_run_seq (runstore/migrations/001_runstore.sql) covers exactly the rows carrying it,
// and each statement below repeats the predicate literally so that the
// planner can prove the index applies.
const marker = `{"runstore": "v1"}`

const markerPred = `e.metadata @> '{"runstore": "v1"}'`

// statements are the store's SQL texts, rendered once for its schema.
type statements struct {
	lastSeq, fetch, existingSeq, getSnapshot, deleteRun, deleteSnapshot string
	loadSnapshots, upsertSnapshot, lag, deleteSnapshots                 string
	unreflected                                                         string
	projectorLock, lagging, markStale, staleRuns                        string
	clearStale, countStale, insertPending                               string
}

func newStatements(schema string) statements {
	ev := schema + ".events"
	// The last event of the whole log (events_log_order backward, one row).
	head := `LEFT JOIN LATERAL (SELECT transaction_id, position, occurred_at FROM ` + ev + `
				ORDER BY transaction_id DESC, position DESC LIMIT 1) h ON true`
	return statements{
		// The decision read of an append that does not know the run's last
		// runSeq: in ONE statement (one snapshot) the snapshot, the head of the
		// log (backward scan of events_log_order, one row) and the run's last
		// runSeq (backward scan of events_runstore_run_seq, one row). Together
		// they make a decision cursor exactly like eventstore.Head's: every run
		// event visible in the snapshot was seen, and the max is over them.
		lastSeq: `SELECT s.snap::text, coalesce(h.transaction_id, '0'), coalesce(h.position, 0), coalesce(m.seq, 0),
				CASE WHEN isfinite(h.occurred_at) THEN (extract(epoch FROM h.occurred_at) * 1000000)::bigint ELSE 0 END
			FROM (SELECT pg_current_snapshot() AS snap) s
			` + head + `
			LEFT JOIN LATERAL (SELECT (e.data->'runSeq')::bigint AS seq FROM ` + ev + ` e
				WHERE e.data->>'runId' = $1 AND ` + markerPred + `
				ORDER BY e.data->'runSeq' DESC LIMIT 1) m ON true`,
		// A page of a run: a range scan of events_runstore_run_seq in runSeq
		// order, no sort. A plain (READ COMMITTED) read is gap-free here: see
		// docs/RUNSTORE.md, "Watermark readers".
		fetch: `SELECT e.data, e.occurred_at FROM ` + ev + ` e
			WHERE e.data->>'runId' = $1 AND ` + markerPred + `
			  AND e.data->'runSeq' > to_jsonb($2::bigint)
			ORDER BY e.data->'runSeq' LIMIT $3`,
		// The runSeq of the event holding a run's idempotency key: events_tags
		// (GIN) on the two tags.
		existingSeq: `SELECT (e.data->'runSeq')::bigint FROM ` + ev + ` e
			WHERE e.tags @> $1::text[] AND ` + markerPred + ` LIMIT 1`,
		// run_snapshots primary key.
		getSnapshot: `SELECT snapshot_data FROM ` + schema + `.run_snapshots WHERE run_id = $1`,
		// Retention function of the core (events_tags GIN inside).
		deleteRun: `SELECT ` + schema + `.delete_events_tagged($1)`,
		// run_snapshots primary key.
		deleteSnapshot: `DELETE FROM ` + schema + `.run_snapshots WHERE run_id = $1`,
		// run_snapshots primary key, one probe per run of the batch.
		loadSnapshots: `SELECT run_id, snapshot_data, stale_since IS NOT NULL FROM ` + schema + `.run_snapshots WHERE run_id = ANY ($1::text[])`,
		// run_snapshots primary key.
		upsertSnapshot: `INSERT INTO ` + schema + `.run_snapshots
				(run_id, status, last_event_seq, snapshot_data, started_at, completed_at, projected_at, version)
			VALUES ($1, $2, $3, $4, $5, $6, now(), 1)
			ON CONFLICT (run_id) DO UPDATE SET status = excluded.status,
				last_event_seq = excluded.last_event_seq, snapshot_data = excluded.snapshot_data,
				started_at = excluded.started_at, completed_at = excluded.completed_at,
				projected_at = now(), version = ` + schema + `.run_snapshots.version + 1`,
		// The first run event after the checkpoint, in log order, that its
		// run's snapshot does not hold yet (events_log_order range scan from
		// the checkpoint, a run_snapshots primary-key probe per run event):
		// its age is the projector's lag. Events the projector applied
		// beyond a held horizon do not count; the scan covers the events
		// between the checkpoint and the first one missing.
		lag: `SELECT e.occurred_at, now() FROM ` + ev + ` e
			LEFT JOIN ` + schema + `.run_snapshots r ON r.run_id = e.data->>'runId'
			WHERE (e.transaction_id, e.position) > ($1::xid8, $2::bigint) AND ` + markerPred + `
			  AND (r.run_id IS NULL OR (e.data->>'runSeq')::bigint > r.last_event_seq)
			ORDER BY e.transaction_id, e.position LIMIT 1`,
		// CatchUp's check: the first run event after $1/$2 (at least the
		// projector's checkpoint) that was committed in the snapshot $3 (the
		// call's: below its xmax and visible in it) and that its run's snapshot
		// does not hold yet: no snapshot, runSeq past last_event_seq, or
		// runSeq inside a gap the snapshot records (a gap filled later). A
		// range scan of events_runstore_log_order bounded by the checkpoint
		// and xmax($3), a run_snapshots primary-key probe per run event; no
		// row: every run event committed before the call is reflected.
		unreflected: `SELECT e.transaction_id, e.position FROM ` + ev + ` e
			LEFT JOIN ` + schema + `.run_snapshots r ON r.run_id = e.data->>'runId'
			WHERE (e.transaction_id, e.position) > ($1::xid8, $2::bigint)
			  AND e.transaction_id < pg_snapshot_xmax($3::pg_snapshot) AND ` + markerPred + `
			  AND pg_visible_in_snapshot(e.transaction_id, $3::pg_snapshot)
			  AND (r.run_id IS NULL OR (e.data->>'runSeq')::bigint > r.last_event_seq
				OR jsonb_path_exists(r.snapshot_data, '$.gaps[*] ? (@.from <= $s && @.to >= $s)',
					jsonb_build_object('s', e.data->'runSeq')))
			ORDER BY e.transaction_id, e.position LIMIT 1`,
		// Runstore.Reset's clearing of the read model (whole table).
		deleteSnapshots: `DELETE FROM ` + schema + `.run_snapshots`,
		// Runs, not STALE yet, holding a committed run event past the
		// checkpoint that their snapshot does not hold and that is older than
		// the resync threshold ($3 seconds): the lag trigger of a resync
		// (events_runstore_log_order range from the checkpoint, a
		// run_snapshots primary-key probe per run event).
		lagging: `SELECT DISTINCT e.data->>'runId' FROM ` + ev + ` e
			LEFT JOIN ` + schema + `.run_snapshots r ON r.run_id = e.data->>'runId'
			WHERE (e.transaction_id, e.position) > ($1::xid8, $2::bigint) AND ` + markerPred + `
			  AND (r.run_id IS NULL OR ((e.data->>'runSeq')::bigint > r.last_event_seq AND r.stale_since IS NULL))
			  AND e.occurred_at < now() - make_interval(secs => $3)
			LIMIT $4`,
		// run_snapshots primary key: the run is STALE from now (or since it
		// already was) until a resync clears it.
		markStale: `UPDATE ` + schema + `.run_snapshots SET stale_since = coalesce(stale_since, now()),
				stale_reason = coalesce(stale_reason, $2) WHERE run_id = $1`,
		// run_snapshots_stale (partial): the STALE runs, oldest first.
		staleRuns: `SELECT run_id, stale_since, stale_reason FROM ` + schema + `.run_snapshots
			WHERE stale_since IS NOT NULL ORDER BY stale_since LIMIT $1`,
		// run_snapshots primary key: the row of a run the projector has not
		// seen, so that it can be marked STALE.
		insertPending: `INSERT INTO ` + schema + `.run_snapshots (run_id, status, last_event_seq, snapshot_data)
			VALUES ($1, $2, 0, $3) ON CONFLICT (run_id) DO NOTHING`,
		// run_snapshots primary key: a resync rebuilt the snapshot.
		clearStale: `UPDATE ` + schema + `.run_snapshots SET stale_since = NULL, stale_reason = NULL WHERE run_id = $1`,
		// run_snapshots_stale (partial).
		countStale: `SELECT count(*) FROM ` + schema + `.run_snapshots WHERE stale_since IS NOT NULL`,
		// Serialises projector instances (and DeleteRun) without giving the
		// transaction an xid (a row lock would, and would hold the tailing
		// horizon below its own writes). The two-int4 form is a different lock
		// space from the core's bigint keys.
		projectorLock: `SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`,
	}
}
